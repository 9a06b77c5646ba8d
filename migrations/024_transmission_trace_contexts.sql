-- 024: the W3C trace context (traceparent) a message in the transmission queue was sent
-- with, NULL when none (pybroker/docs/otel.md): a message sent again after its instance
-- restarted carries the trace it began in. No default, so DuckDB fills NULL into the rows
-- and commits the ADD COLUMN on a file whose table has rows.
ALTER TABLE transmission_queue ADD COLUMN traceparent VARCHAR;
