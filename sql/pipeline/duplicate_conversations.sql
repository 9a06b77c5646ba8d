{#-
  pipeline resolve and impact: conversation_ids that appear more than once in the input
  (the column is unique: one decision per conversation). At most 5 are shown, with how
  many rows each has. Input: {{ conversations }}.
-#}
SELECT c.conversation_id, COUNT(*) AS copies
FROM {{ conversations }} AS c
GROUP BY c.conversation_id
HAVING COUNT(*) > 1
ORDER BY c.conversation_id
LIMIT 5
