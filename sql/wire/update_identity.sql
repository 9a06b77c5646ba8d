-- The endpoint certificate, made on first need (the private key stays in the file).
UPDATE instance_settings SET instance_id = $instance_id, endpoint_certificate = $certificate,
    endpoint_private_key = $private_key
