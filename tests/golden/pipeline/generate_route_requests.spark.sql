-- as one query
SELECT
  CAST(NULL AS INT) AS database_id,
  CAST(NULL AS STRING) AS service_name,
  CAST(NULL AS TIMESTAMP_NTZ) AS requested_at
FROM params AS p
WHERE
  FALSE

-- final query
SELECT
  CAST(NULL AS INT) AS database_id,
  CAST(NULL AS STRING) AS service_name,
  CAST(NULL AS TIMESTAMP_NTZ) AS requested_at
FROM params AS p
WHERE
  FALSE
