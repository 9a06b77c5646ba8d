-- as one query
WITH drawn AS (
  SELECT
    n.n,
    p.seed,
    p.route_count,
    p.start_us,
    p.span_us,
    CAST(FLOOR(p.route_count * 0.45) AS BIGINT) AS base,
    MD5(p.seed || '|conversation|' || CAST(n.n AS STRING)) AS digest
  FROM numbers AS n
  CROSS JOIN params AS p
  WHERE
    n.n < p.conversation_count
), shaped AS (
  SELECT
    d.*,
    CAST(FLOOR(
      (
        CAST((
          CAST(LOCATE(SUBSTRING(d.digest, 1, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 2, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 3, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 4, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 5, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 6, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 7, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 8, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
        ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
      ) * (
        CAST((
          CAST(LOCATE(SUBSTRING(d.digest, 1, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 2, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 3, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 4, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 5, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 6, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 7, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 8, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
        ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
      ) * d.route_count * 1.02
    ) AS BIGINT) AS service_number,
    (
      CAST((
        CAST(LOCATE(SUBSTRING(d.digest, 9, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 10, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 11, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 12, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 13, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 14, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 15, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 16, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
      ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
    ) AS origin_draw,
    (
      CAST((
        CAST(LOCATE(SUBSTRING(d.digest, 17, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 18, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 19, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 20, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 21, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 22, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 23, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 24, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
      ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
    ) AS broker_draw,
    (
      CAST((
        CAST(LOCATE(SUBSTRING(d.digest, 25, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 26, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 27, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 28, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 29, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 30, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 31, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 32, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
      ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
    ) AS time_draw
  FROM drawn AS d
)
SELECT
  (
    SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 1, 8) || '-' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 9, 4) || '-4' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 14, 3) || '-8' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 18, 3) || '-' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 21, 12)
  ) AS conversation_id,
  CASE
    WHEN s.origin_draw < 0.1
    THEN 'outside'
    ELSE CASE 5 + (
        s.service_number + CASE WHEN s.origin_draw < 0.8 THEN 0 ELSE 1 END
      ) % 3
      WHEN 5
      THEN 'Sales'
      WHEN 6
      THEN 'Inventory'
      ELSE 'Billing'
    END
  END AS origin,
  'svc_' || LPAD(CAST(s.service_number AS STRING), 7, '0') AS service_name,
  CASE
    WHEN s.broker_draw >= 0.05
    THEN CAST(NULL AS STRING)
    WHEN s.service_number >= s.base
    AND s.base + 3 * (
      s.service_number - s.base
    ) + 2 < CAST(FLOOR(s.route_count * 0.65) AS BIGINT)
    THEN (
      SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        1,
        8
      ) || '-' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        9,
        4
      ) || '-4' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        14,
        3
      ) || '-8' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        18,
        3
      ) || '-' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        21,
        12
      )
    )
    ELSE (
      SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 1, 8) || '-' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 9, 4) || '-4' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 14, 3) || '-8' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 18, 3) || '-' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 21, 12)
    )
  END AS broker_instance,
  CAST(TIMESTAMP_MICROS(s.start_us + CAST(FLOOR(s.time_draw * s.span_us) AS BIGINT)) AS TIMESTAMP_NTZ) AS begin_time
FROM shaped AS s

-- stage drawn (read 1x)
SELECT
  n.n,
  p.seed,
  p.route_count,
  p.start_us,
  p.span_us,
  CAST(FLOOR(p.route_count * 0.45) AS BIGINT) AS base,
  MD5(p.seed || '|conversation|' || CAST(n.n AS STRING)) AS digest
FROM numbers AS n
CROSS JOIN params AS p
WHERE
  n.n < p.conversation_count

-- stage shaped (read 1x)
SELECT
  d.*,
  CAST(FLOOR(
    (
      CAST((
        CAST(LOCATE(SUBSTRING(d.digest, 1, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 2, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 3, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 4, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 5, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 6, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 7, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 8, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
      ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
    ) * (
      CAST((
        CAST(LOCATE(SUBSTRING(d.digest, 1, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 2, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 3, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 4, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 5, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 6, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 7, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 8, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
      ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
    ) * d.route_count * 1.02
  ) AS BIGINT) AS service_number,
  (
    CAST((
      CAST(LOCATE(SUBSTRING(d.digest, 9, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 10, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 11, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 12, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 13, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 14, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 15, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 16, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
    ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
  ) AS origin_draw,
  (
    CAST((
      CAST(LOCATE(SUBSTRING(d.digest, 17, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 18, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 19, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 20, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 21, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 22, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 23, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 24, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
    ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
  ) AS broker_draw,
  (
    CAST((
      CAST(LOCATE(SUBSTRING(d.digest, 25, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(d.digest, 26, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(d.digest, 27, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(d.digest, 28, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(d.digest, 29, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(d.digest, 30, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(d.digest, 31, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(d.digest, 32, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
    ) AS DOUBLE) / CAST(4294967296 AS DOUBLE)
  ) AS time_draw
FROM drawn AS d

-- final query
SELECT
  (
    SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 1, 8) || '-' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 9, 4) || '-4' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 14, 3) || '-8' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 18, 3) || '-' || SUBSTRING(MD5(s.seed || '|id|' || CAST(s.n AS STRING)), 21, 12)
  ) AS conversation_id,
  CASE
    WHEN s.origin_draw < 0.1
    THEN 'outside'
    ELSE CASE 5 + (
        s.service_number + CASE WHEN s.origin_draw < 0.8 THEN 0 ELSE 1 END
      ) % 3
      WHEN 5
      THEN 'Sales'
      WHEN 6
      THEN 'Inventory'
      ELSE 'Billing'
    END
  END AS origin,
  'svc_' || LPAD(CAST(s.service_number AS STRING), 7, '0') AS service_name,
  CASE
    WHEN s.broker_draw >= 0.05
    THEN CAST(NULL AS STRING)
    WHEN s.service_number >= s.base
    AND s.base + 3 * (
      s.service_number - s.base
    ) + 2 < CAST(FLOOR(s.route_count * 0.65) AS BIGINT)
    THEN (
      SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        1,
        8
      ) || '-' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        9,
        4
      ) || '-4' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        14,
        3
      ) || '-8' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        18,
        3
      ) || '-' || SUBSTRING(
        MD5(
          s.seed || '|broker|' || CAST(s.base + 3 * (
            s.service_number - s.base
          ) + s.n % 3 AS STRING)
        ),
        21,
        12
      )
    )
    ELSE (
      SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 1, 8) || '-' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 9, 4) || '-4' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 14, 3) || '-8' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 18, 3) || '-' || SUBSTRING(MD5(s.seed || '|nobroker|' || CAST(s.service_number AS STRING)), 21, 12)
    )
  END AS broker_instance,
  CAST(TIMESTAMP_MICROS(s.start_us + CAST(FLOOR(s.time_draw * s.span_us) AS BIGINT)) AS TIMESTAMP_NTZ) AS begin_time
FROM shaped AS s
