-- R8.2: the dialog that carries a route request (its initiator endpoint).
INSERT INTO route_request_dialogs (database_id, service_name, conversation_handle, retry_at)
VALUES ($database_id, $service_name, $conversation_handle, NULL)
