-- as one query
SELECT DISTINCT
  k.origin,
  k.service_name,
  k.broker_instance,
  k.routed_at
FROM conversation_keys AS k
WHERE
  NOT k.routed_at IS NULL

-- final query
SELECT DISTINCT
  k.origin,
  k.service_name,
  k.broker_instance,
  k.routed_at
FROM conversation_keys AS k
WHERE
  NOT k.routed_at IS NULL
