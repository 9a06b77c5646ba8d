-- /metrics: the name of each database, by id (the counters are kept by id)
SELECT database_id, name FROM main.databases ORDER BY database_id
