-- R8.2: the request dialog ended; the route request stays until $retry_at, then goes.
UPDATE route_request_dialogs
SET conversation_handle = NULL, retry_at = $retry_at
WHERE database_id = $database_id AND service_name = $service_name
