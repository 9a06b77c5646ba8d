UPDATE routes
SET remote_service_name = $remote_service_name,
    broker_instance = $broker_instance,
    lifetime = $lifetime,
    address = $address,
    mirror_address = $mirror_address
WHERE database_id = $database_id AND name = $name
