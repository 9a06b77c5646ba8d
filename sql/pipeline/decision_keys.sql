{#-
  pipeline resolve, stage 3: the distinct routing keys, far fewer than conversations; the
  routing steps run on these only. Input: {{ conversation_keys }}.
-#}
SELECT DISTINCT k.origin, k.service_name, k.broker_instance, k.routed_at
FROM {{ conversation_keys }} AS k
WHERE k.routed_at IS NOT NULL
