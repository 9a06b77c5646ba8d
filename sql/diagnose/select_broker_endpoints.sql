-- The broker endpoint of one instance (P2): its state and the address it listens on.
-- ip_address NULL is LISTENER_IP = ALL (pybroker listens on 127.0.0.1); port 0 is a
-- dynamic port, whose number the file does not hold.
SELECT e.name, e.state_desc, t.port, t.ip_address
FROM sys.service_broker_endpoints AS e
JOIN sys.tcp_endpoints AS t ON t.name = e.name
ORDER BY e.name
