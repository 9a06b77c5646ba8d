-- Admit a peer by its certificate (CREATE CERTIFICATE ... FROM FILE + GRANT CONNECT).
INSERT INTO trusted_certificates (name, certificate, thumbprint, subject, start_date,
    expiry_date, create_date)
VALUES ($name, $certificate, $thumbprint, $subject, $start_date, $expiry_date, $create_date)
