-- `pybroker demo`, across processes: what each connection of an instance carried (C6).
SELECT peer_address, is_accept, principal_name, total_fragments_sent,
    total_fragments_received
FROM sys.dm_broker_connections
ORDER BY is_accept, connect_time
