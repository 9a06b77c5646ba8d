{#-
  pipeline generate: master and msdb (SQL Server's ids 1 and 4) and three user databases,
  each with a broker identifier derived from the seed. Input: {{ params }} (seed, start_us).
-#}
{% from 'pipeline/_draw.sql' import guid %}
SELECT
    CAST(d.database_id AS INTEGER) AS database_id,
    d.name,
    {{ guid("md5(p.seed || '|database|' || d.name)") }} AS service_broker_guid,
    TRUE AS is_broker_enabled,
    CAST(make_timestamp(p.start_us) AS TIMESTAMP) AS create_date
FROM (
    VALUES (1, 'master'), (4, 'msdb'), (5, 'Sales'), (6, 'Inventory'), (7, 'Billing')
) AS d(database_id, name)
CROSS JOIN {{ params }} AS p
