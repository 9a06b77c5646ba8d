{#-
  `pybroker export`: the transmission queue with each body whole, as sys.transmission_queue
  shows it (a large body SEND kept as pieces, migrations/011, put together there), with
  the database_id the exported schema has. export_table.sql reads it in place of the table.
  DuckDB only: it reads the instance file.
-#}
(
    SELECT d.database_id, v.* EXCLUDE (database_name)
    FROM sys.transmission_queue AS v
    JOIN main.databases AS d ON d.name = v.database_name
)
