-- `pybroker demo`, across processes: which partner of a mirrored pair a sender finds
-- principal (R9.2, R9.3).
SELECT route_name, state_desc, principal_address, address_answer, mirror_address_answer
FROM sys.dm_broker_mirrored_routes
ORDER BY route_name
