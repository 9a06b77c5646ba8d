-- The name a peer's certificate is trusted under, if it is (a certificate has one name).
SELECT c.name FROM trusted_certificates AS c WHERE c.thumbprint = $thumbprint
