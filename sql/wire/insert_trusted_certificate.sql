-- Keep a peer's certificate (CREATE CERTIFICATE ... [AUTHORIZATION user] FROM FILE, or
-- Instance.trust); select_trusted_certificates.sql says whether it admits the peer.
INSERT INTO trusted_certificates (name, certificate, thumbprint, subject, start_date,
    expiry_date, create_date, principal_name)
VALUES ($name, $certificate, $thumbprint, $subject, $start_date, $expiry_date, $create_date,
    $principal_name)
