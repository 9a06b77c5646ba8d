-- sys.dm_broker_mirrored_routes: each mirrored pair the broker endpoint sends to (R9), with
-- the routes that name it. state_desc: PROBING (asking both partners which is principal,
-- R9.2, R9.3), PRINCIPAL (sending to principal_address only, R9.2) or NO PRINCIPAL
-- (neither claims it: nothing is sent, both are asked again, R9.4). since is when it took
-- that state; address_answer and mirror_address_answer are what each partner last said
-- (PRINCIPAL, MIRROR, NONE, UNREACHABLE, or ASKED while a probe is out). As it is when read
-- (pybroker/kernel/live_views.py).
CREATE OR REPLACE VIEW sys.dm_broker_mirrored_routes AS
SELECT d.name AS database_name, r.name AS route_name, m.address, m.mirror_address,
    m.service_name, m.broker_instance, m.state_desc, m.principal_address, m.since,
    m.last_probe_time, m.address_answer, m.mirror_address_answer
FROM main.broker_mirrored_routes AS m
LEFT JOIN main.routes AS r ON r.address = m.address AND r.mirror_address = m.mirror_address
LEFT JOIN main.databases AS d ON d.database_id = r.database_id
