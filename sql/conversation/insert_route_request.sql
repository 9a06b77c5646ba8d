-- R2.4, R8.2: a route request for $service_name of database $database_id is outstanding
-- (routing reads this row: R2.4 does not ask again while it exists). Returns the row when
-- it is new, nothing when one was already there.
INSERT INTO route_requests (database_id, service_name, requested_at)
VALUES ($database_id, $service_name, $now)
ON CONFLICT DO NOTHING
RETURNING database_id
