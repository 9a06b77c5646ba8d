-- the console's connections: the broker endpoint's network connections, as they are now
SELECT connection_id, peer_address, state_desc, is_accept, connect_time, login_time,
    principal_name, encryption_algorithm_desc, total_bytes_sent, total_bytes_received
FROM sys.dm_broker_connections
ORDER BY connection_id
