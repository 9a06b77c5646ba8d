-- as one query
SELECT
  CAST(q.database_id AS INT) AS database_id,
  'PipelineQueue' AS name,
  TRUE AS is_receive_enabled,
  TRUE AS is_enqueue_enabled,
  CAST(TIMESTAMP_MICROS(p.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM VALUES
  (5),
  (6),
  (7) AS q(database_id)
CROSS JOIN params AS p

-- final query
SELECT
  CAST(q.database_id AS INT) AS database_id,
  'PipelineQueue' AS name,
  TRUE AS is_receive_enabled,
  TRUE AS is_enqueue_enabled,
  CAST(TIMESTAMP_MICROS(p.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM VALUES
  (5),
  (6),
  (7) AS q(database_id)
CROSS JOIN params AS p
