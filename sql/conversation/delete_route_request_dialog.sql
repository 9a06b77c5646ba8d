-- R8.2: the broker's side of a route request that went (see delete_route_request.sql).
DELETE FROM route_request_dialogs
WHERE database_id = $database_id AND service_name = $service_name
