{#-
  pipeline resolve, after stage 2: whether two routing keys' texts of the conversations
  share a hash (decision_keys.sql carries the answer on every key): then
  decide_conversations.sql joins by the texts, not by the hash. No key: nothing shared.
  Input: {{ keys }}.
-#}
SELECT COUNT(*) AS shared_keys
FROM {{ keys }} AS k
WHERE k.key_hash_shared
