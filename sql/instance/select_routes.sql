SELECT r.name, r.route_id, r.remote_service_name, r.broker_instance, r.lifetime, r.address,
    r.mirror_address
FROM routes AS r
WHERE r.database_id = $database_id
ORDER BY r.route_id
