{#- pipeline generate: no pending route requests (R8.2); an empty table of the schema. -#}
SELECT
    CAST(NULL AS INTEGER) AS database_id,
    CAST(NULL AS VARCHAR) AS service_name,
    CAST(NULL AS TIMESTAMP) AS requested_at
FROM {{ params }} AS p
WHERE FALSE
