-- sys.routes: every routing table of the instance, msdb's included, one row per route with
-- the database it belongs to. Expired routes stay (R1.4, R10.4), marked is_expired.
CREATE OR REPLACE VIEW sys.routes AS
SELECT
    d.name AS database_name,
    r.name,
    r.route_id,
    r.remote_service_name,
    r.broker_instance,
    r.lifetime,
    r.address,
    r.mirror_address,
    COALESCE(r.lifetime <= CAST(timezone('UTC', current_timestamp) AS TIMESTAMP), FALSE)
        AS is_expired,
    r.create_date
FROM main.routes AS r
JOIN main.databases AS d ON d.database_id = r.database_id
