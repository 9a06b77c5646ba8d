{#- `pybroker bench routing`: the comparison run, one plain hash join of the same rows
    (each conversation with the routes that name its service), materialized. -#}
CREATE OR REPLACE TEMP TABLE bench_join AS
SELECT c.conversation_id, r.name AS route_name, r.address
FROM bench_conversations AS c
LEFT JOIN routes AS r
    ON r.database_id = $database_id AND r.remote_service_name = c.service_name
