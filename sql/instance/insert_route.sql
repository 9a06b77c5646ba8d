INSERT INTO routes (database_id, route_id, name, remote_service_name, broker_instance,
    lifetime, address, mirror_address, create_date)
VALUES ($database_id, nextval('route_id_seq'), $name, $remote_service_name, $broker_instance,
    $lifetime, $address, $mirror_address, $now)
