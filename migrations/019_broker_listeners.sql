-- 019: the broker endpoint a process listens on (P2), written with the other views of what
-- a process holds (pybroker/live_views.py) right before a query reads it, emptied when the
-- instance opens for writing and when it closes. sys.service_broker_endpoints and
-- sys.tcp_endpoints show it when the file defines no endpoint (a process's defaults:
-- `pybroker serve` on 127.0.0.1:4022, its --port and --host, Instance.start_endpoint()).
CREATE TABLE broker_listeners (
    address                TEXT      PRIMARY KEY,   -- tcp://host:port, as it listens
    is_encryption_enabled  BOOLEAN   NOT NULL,
    since                  TIMESTAMP NOT NULL
);
