-- as one query
SELECT
  CAST(d.database_id AS INT) AS database_id,
  d.name,
  (
    SUBSTRING(MD5(p.seed || '|database|' || d.name), 1, 8) || '-' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 9, 4) || '-4' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 14, 3) || '-8' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 18, 3) || '-' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 21, 12)
  ) AS service_broker_guid,
  TRUE AS is_broker_enabled,
  CAST(TIMESTAMP_MICROS(p.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM VALUES
  (1, 'master'),
  (4, 'msdb'),
  (5, 'Sales'),
  (6, 'Inventory'),
  (7, 'Billing') AS d(database_id, name)
CROSS JOIN params AS p

-- final query
SELECT
  CAST(d.database_id AS INT) AS database_id,
  d.name,
  (
    SUBSTRING(MD5(p.seed || '|database|' || d.name), 1, 8) || '-' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 9, 4) || '-4' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 14, 3) || '-8' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 18, 3) || '-' || SUBSTRING(MD5(p.seed || '|database|' || d.name), 21, 12)
  ) AS service_broker_guid,
  TRUE AS is_broker_enabled,
  CAST(TIMESTAMP_MICROS(p.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM VALUES
  (1, 'master'),
  (4, 'msdb'),
  (5, 'Sales'),
  (6, 'Inventory'),
  (7, 'Billing') AS d(database_id, name)
CROSS JOIN params AS p
