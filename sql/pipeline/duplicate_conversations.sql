{#-
  pipeline resolve and impact: conversation_ids that appear more than once in the input
  (the column is unique: one decision per conversation). At most 5 are shown, with how
  many rows each has. The ids are grouped by a 64-bit hash first (8 bytes a row instead of
  the text), and only ids whose hash more than one row shares are grouped exactly: the
  answer is exact, and without duplicates or collisions the second pass finds nothing to
  join (_id_hash.sql). It runs only when conversation_id_counts.sql finds fewer distinct
  hashes than rows. Input: {{ conversations }}; engine: {{ engine }}.
-#}
{% from 'pipeline/_id_hash.sql' import id_hash %}
WITH shared_hash AS (
    SELECT h.id_hash
    FROM (
        SELECT {{ id_hash('c.conversation_id', engine) }} AS id_hash
        FROM {{ conversations }} AS c
    ) AS h
    GROUP BY h.id_hash
    HAVING COUNT(*) > 1
)
SELECT c.conversation_id, COUNT(*) AS copies
FROM {{ conversations }} AS c
JOIN shared_hash AS s ON s.id_hash = {{ id_hash('c.conversation_id', engine) }}
GROUP BY c.conversation_id
HAVING COUNT(*) > 1
ORDER BY c.conversation_id
LIMIT 5
