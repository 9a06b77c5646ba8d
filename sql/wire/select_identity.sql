-- This instance's identity on the wire: its GUID, endpoint certificate and private key.
SELECT s.instance_id, s.endpoint_certificate, s.endpoint_private_key FROM instance_settings AS s
