-- 006: internal activation (SQL Server's queue activation, C3): the ACTIVATION settings of
-- CREATE/ALTER QUEUE, and the tables behind sys.dm_broker_queue_monitors and
-- sys.dm_broker_activated_tasks.

-- A queue's ACTIVATION: whether it is ON, the Python callable it starts (module.path:function),
-- how many readers may run at once and EXECUTE AS (SELF or OWNER). A queue never given
-- ACTIVATION has no procedure, 0 readers and no EXECUTE AS, as SQL Server shows it.
ALTER TABLE service_queues ADD COLUMN is_activation_enabled BOOLEAN DEFAULT FALSE;
ALTER TABLE service_queues ADD COLUMN activation_procedure VARCHAR;
ALTER TABLE service_queues ADD COLUMN max_readers INTEGER DEFAULT 0;
ALTER TABLE service_queues ADD COLUMN activation_execute_as VARCHAR;

-- The queue monitors of the process that runs activation, as of its last change (written
-- by that process when a monitor's state changes, at most about a second late; emptied
-- when the instance opens for writing and when activation stops).
CREATE TABLE broker_queue_monitors (
    database_id              INTEGER   NOT NULL,
    queue_name               VARCHAR   NOT NULL,
    state                    VARCHAR   NOT NULL,   -- INACTIVE, NOTIFIED, RECEIVES_OCCURRING
    last_empty_rowset_time   TIMESTAMP,
    last_activated_time      TIMESTAMP,
    tasks_waiting            INTEGER   NOT NULL,
    PRIMARY KEY (database_id, queue_name)
);

-- One row per running reader (an activated callable), written with the monitors.
CREATE TABLE broker_activated_tasks (
    spid                     INTEGER   PRIMARY KEY,
    database_id              INTEGER   NOT NULL,
    queue_name               VARCHAR   NOT NULL,
    procedure_name           VARCHAR   NOT NULL,
    execute_as               VARCHAR   NOT NULL,   -- SELF or OWNER
    start_time               TIMESTAMP NOT NULL
);
