{#-
  pipeline resolve, stage 5: one decision per conversation, the columns of the
  route_decision() macro after conversation_id.

  The arbitrary picks (R2.3 broker identifier, R3 route, R4.2 database) come from one
  48-bit integer per conversation: the first 12 hex digits of md5(conversation_id), read
  digit by digit (both engines compute md5 as lowercase hex; hash() differs between them
  and DuckDB cannot cast hex text to an integer the way Spark's conv() does). The integer
  is split into mixed-radix digits: draw mod group_count picks the identifier, the next
  digit the route, the next the database; exactly one option of the key matches. Over
  many conversations each option gets its weight's share (R2.3: the pick spreads over all
  identifiers). A conversation whose origin is no database of the instance, or with no
  begin_time, keeps a row with NULL decision columns.
  Inputs: {{ conversation_keys }}, {{ key_options }}.
-#}
WITH conversation_draw AS (
    SELECT
        h.conversation_id, h.origin, h.service_name, h.broker_instance, h.routed_at,
        (
        {%- for i in range(12) %}
            {{ "+ " if not loop.first }}CAST(strpos('0123456789abcdef', substr(h.digest, {{ i + 1 }}, 1)) - 1 AS BIGINT) * {{ 16 ** (11 - i) }}
        {%- endfor %}
        ) AS draw
    FROM (
        SELECT k.*, md5(k.conversation_id) AS digest
        FROM {{ conversation_keys }} AS k
    ) AS h
)
SELECT
    d.conversation_id,
    o.outcome,
    o.route,
    o.address,
    o.mirror_address,
    o."database",
    o.broker_instance,
    o.match_step,
    o.choose_step,
    o.locate_step,
    o.decided_by
FROM conversation_draw AS d
LEFT JOIN {{ key_options }} AS o
    ON o.origin = d.origin
    AND o.service_name = d.service_name
    AND o.broker_key = COALESCE(d.broker_instance, '')
    AND o.routed_at = d.routed_at
    AND o.group_rank = d.draw % o.group_count
    AND o.route_rank = (d.draw // o.group_count) % o.route_count
    AND o.db_rank = (d.draw // (o.group_count * o.route_count)) % o.db_count
