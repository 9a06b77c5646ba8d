-- as one query
SELECT
  COUNT(*) AS shared_keys
FROM decision_keys AS k
WHERE
  k.key_hash_shared

-- final query
SELECT
  COUNT(*) AS shared_keys
FROM decision_keys AS k
WHERE
  k.key_hash_shared
