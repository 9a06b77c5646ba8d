-- sys.dm_broker_connections: one row per network connection of the broker endpoint (C6,
-- P9), in SQL Server's columns, as they are when read (pybroker/kernel/live_views.py writes the
-- table right before).
CREATE OR REPLACE VIEW sys.dm_broker_connections AS
SELECT c.connection_id, c.peer_address, c.state_desc, c.is_accept, c.connect_time,
    c.login_time, c.last_activity_time, c.authentication_method, c.principal_name,
    c.login_state_desc, c.encryption_algorithm_desc, c.total_bytes_sent,
    c.total_bytes_received, c.total_fragments_sent, c.total_fragments_received,
    c.total_sends, c.total_receives, c.is_send_flow_controlled
FROM main.broker_connections AS c
