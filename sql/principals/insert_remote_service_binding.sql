-- CREATE REMOTE SERVICE BINDING.
INSERT INTO remote_service_bindings (database_id, name, name_key, remote_service_name,
    user_name, is_anonymous_on, create_date)
VALUES ($database_id, $name, $name_key, $remote_service_name, $user_name, $is_anonymous_on,
    $create_date)
