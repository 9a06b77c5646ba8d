-- 008: sys.dm_broker_forwarded_messages (R7.3), as of the engine's last snapshot of what
-- the forwarder holds in memory (at most a second old while the endpoint runs; emptied
-- when the instance opens and when its endpoint closes). The messages themselves are
-- never written: only these columns, so that the view can be queried like the others.
CREATE TABLE broker_forwarded_messages (
    conversation_id          VARCHAR   NOT NULL,
    is_initiator             BOOLEAN   NOT NULL,
    to_service_name          VARCHAR   NOT NULL,
    to_broker_instance       VARCHAR,
    from_service_name        VARCHAR   NOT NULL,
    from_broker_instance     VARCHAR   NOT NULL,
    adjacent_broker_address  VARCHAR   NOT NULL,
    message_sequence_number  BIGINT    NOT NULL,
    message_fragment_number  INTEGER   NOT NULL,
    hops_remaining           TINYINT   NOT NULL,
    time_to_live             INTEGER   NOT NULL,
    time_consumed            INTEGER   NOT NULL,
    message_id               VARCHAR   NOT NULL
);
