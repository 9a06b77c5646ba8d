-- R8.2: the time-out after an ended route request passed: R2.4 may ask again.
DELETE FROM route_requests
WHERE database_id = $database_id AND service_name = $service_name
