-- ALTER LOGIN ... ENABLE | DISABLE.
UPDATE server_principals SET is_disabled = $is_disabled WHERE name_key = $name_key
