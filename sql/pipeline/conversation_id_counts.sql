{#-
  pipeline resolve and impact, the first check of a table of conversations: how many rows
  it has and how many distinct hashes of conversation_id (_id_hash.sql). When the two are
  equal, no conversation_id appears twice (copies of an id share its hash), and the exact
  query (duplicate_conversations.sql) need not run; it runs only when they differ, to name
  the duplicates (or to find that two ids only share a hash). One aggregation of 8 bytes a
  row, without the join the exact query needs.
  Input: {{ conversations }}; engine: {{ engine }}.
-#}
{% from 'pipeline/_id_hash.sql' import id_hash %}
SELECT
    COUNT(*) AS conversation_rows,
    COUNT(DISTINCT {{ id_hash('c.conversation_id', engine) }}) AS distinct_hashes
FROM {{ conversations }} AS c
