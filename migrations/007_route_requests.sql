-- 007: dynamic routing's route request dialogs (SPEC R2.4, R8.2).
-- route_requests (001) is what routing reads: while a row names a service, R2.4 does not
-- ask again. This table is the broker's side of each such row: the request dialog sent to
-- the dynamic routing service and, once that dialog has ended, when the route_requests
-- row goes (so that conversations still waiting ask again). Both survive a restart, so a
-- reopened instance never sends a second request for a service already asked about.
CREATE TABLE route_request_dialogs (
    database_id          INTEGER   NOT NULL,
    service_name         VARCHAR   NOT NULL,
    conversation_handle  VARCHAR,             -- the request's initiator endpoint; NULL once ended
    retry_at             TIMESTAMP,           -- set when the dialog ended (UTC)
    PRIMARY KEY (database_id, service_name)
);
