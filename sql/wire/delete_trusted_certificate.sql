-- A peer is no longer admitted.
DELETE FROM trusted_certificates WHERE name = $name RETURNING name
