-- ALTER CERTIFICATE ... WITH ACTIVE FOR BEGIN_DIALOG = ON | OFF.
UPDATE trusted_certificates SET is_active_for_begin_dialog = $is_active WHERE name = $name
RETURNING name
