-- One row of sys.dm_broker_mirrored_routes (R9).
INSERT INTO broker_mirrored_routes (address, mirror_address, service_name, broker_instance,
    state_desc, principal_address, since, last_probe_time, address_answer,
    mirror_address_answer)
VALUES ($address, $mirror_address, $service_name, $broker_instance, $state_desc,
    $principal_address, $since, $last_probe_time, $address_answer, $mirror_address_answer)
