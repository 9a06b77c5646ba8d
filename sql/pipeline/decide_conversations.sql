{#-
  pipeline resolve, stage 4: one decision per conversation, the columns of the
  route_decision() macro after conversation_id.

  Each conversation finds its key (decision_keys.sql) by its (origin, service_name,
  broker_key) and the epoch its begin_time falls in, and its option by the key's number and
  the three ranks, with equality only. by_hash ({{ by_hash }}): the three texts are compared
  as the key's key_hash, one integer a row, which decision_keys.sql found to name one text
  of these conversations (a key without a service name matches nothing, as NULL = NULL
  does not); otherwise (two texts share a hash) as the texts themselves. The ranks need
  the counts of the picked group and route; the key carries them when they are the same
  throughout the key, else they are looked up (in relations that hold only such keys).
  The arbitrary picks (R2.3 broker identifier, R3 route, R4.2 database) come from one
  48-bit integer per conversation, the first 12 hex digits of md5(conversation_id) (both
  engines compute md5 as lowercase hex; hash() differs between them): draw mod group_count
  picks the identifier, the next mixed-radix digit the route, the next the database. Over
  many conversations each option gets its weight's share (R2.3: the pick spreads over all
  identifiers). A key with one option needs no draw. A conversation whose origin is no
  database of the instance, or with no begin_time, keeps a row with NULL decision columns.
  A key of a wildcard class was decided through the class's least key: its decision names
  the conversation's own broker identifier (R2.1-R2.7 carry it into the decision).
  Inputs: {{ conversations }}, {{ keys }} (decision_keys.sql), {{ key_options }}, and
  {{ option_values }}: the decisions' columns are read from it, the same rows as
  key_options or, on DuckDB, those rows with few-valued text as ENUMs (Engine.categorical);
  engine: {{ engine }} (the draw's cast). broadcast: {{ broadcast }}; when true, each join
  of the conversations with a relation of keys or options carries Spark's BROADCAST hint,
  so the conversations are not shuffled at each of the four joins (Spark cannot size
  these relations: it takes a join's size as the product of its inputs', so it never
  broadcasts them itself). DuckDB reads the hint as a comment.
-#}
{% from 'pipeline/_draw.sql' import draw48 %}
{% from 'pipeline/_id_hash.sql' import key_hash %}
{%- macro broadcast_hint(alias) -%}
{%- if broadcast %} /*+ BROADCAST({{ alias }}) */{% endif -%}
{%- endmacro %}
WITH keyed AS (
    SELECT{{ broadcast_hint('k') }}
        c.conversation_id,
        k.key_id,
        k.in_class,
        k.broker_key,
        k.group_count,
        k.route_count,
        k.db_count,
        CASE WHEN k.option_count > 1 THEN {{ draw48('md5(c.conversation_id)', engine) }}
            ELSE CAST(0 AS BIGINT) END AS draw
    FROM {{ conversations }} AS c
    LEFT JOIN (
        -- The keys with their options' counts. route_count (db_count) is given when every
        -- pick group (route) of the key has the same one, as nearly every key has: then
        -- the ranks follow from the draw and the key alone.
        SELECT km.*, n.group_count, n.option_count,
            CASE WHEN n.min_route_count = n.max_route_count THEN n.max_route_count END
                AS route_count,
            CASE WHEN n.min_db_count = n.max_db_count THEN n.max_db_count END AS db_count
        FROM {{ keys }} AS km
        JOIN (
            SELECT o.key_id,
                MAX(o.group_count) AS group_count, MAX(o.option_count) AS option_count,
                MIN(o.route_count) AS min_route_count, MAX(o.route_count) AS max_route_count,
                MIN(o.db_count) AS min_db_count, MAX(o.db_count) AS max_db_count
            FROM {{ key_options }} AS o
            GROUP BY o.key_id
        ) AS n
            ON n.key_id = km.key_id
    ) AS k
{%- if by_hash %}
        ON k.key_hash = {{ key_hash('c.origin', 'c.service_name',
                                    "COALESCE(lower(c.broker_instance), '')", engine,
                                    key_hash_bits | default(64)) }}
        AND k.service_name IS NOT NULL
{%- else %}
        ON k.origin = c.origin
        AND k.service_name = c.service_name
        AND k.broker_key = COALESCE(lower(c.broker_instance), '')
{%- endif %}
        AND c.begin_time >= k.routed_at
        AND c.begin_time <= k.epoch_last
),
grouped AS (
    -- The route count of the picked group, looked up only for keys whose groups differ.
    SELECT{{ broadcast_hint('g') }}
        d.conversation_id, d.key_id, d.in_class, d.broker_key, d.draw, d.group_count,
        d.db_count,
        d.draw % d.group_count AS group_rank,
        COALESCE(d.route_count, g.route_count) AS route_count
    FROM keyed AS d
    LEFT JOIN (
        SELECT DISTINCT o.key_id, o.group_rank, o.route_count
        FROM {{ key_options }} AS o
        WHERE o.key_id IN (
            SELECT u.key_id FROM {{ key_options }} AS u
            GROUP BY u.key_id HAVING MIN(u.route_count) <> MAX(u.route_count))
    ) AS g
        ON g.key_id = d.key_id AND g.group_rank = d.draw % d.group_count
),
routed AS (
    -- The database count of the picked route, looked up only for keys whose routes differ.
    SELECT{{ broadcast_hint('r') }}
        d.conversation_id, d.key_id, d.in_class, d.broker_key, d.group_rank,
        (d.draw // d.group_count) % d.route_count AS route_rank,
        (d.draw // (d.group_count * d.route_count)) % COALESCE(d.db_count, r.db_count)
            AS db_rank
    FROM grouped AS d
    LEFT JOIN (
        SELECT DISTINCT o.key_id, o.group_rank, o.route_rank, o.db_count
        FROM {{ key_options }} AS o
        WHERE o.key_id IN (
            SELECT u.key_id FROM {{ key_options }} AS u
            GROUP BY u.key_id HAVING MIN(u.db_count) <> MAX(u.db_count))
    ) AS r
        ON r.key_id = d.key_id AND r.group_rank = d.group_rank
        AND r.route_rank = (d.draw // d.group_count) % d.route_count
)
SELECT{{ broadcast_hint('o') }}
    d.conversation_id,
    o.outcome,
    o.route,
    o.address,
    o.mirror_address,
    o."database",
    CASE WHEN d.in_class AND d.broker_key <> '' THEN d.broker_key ELSE o.broker_instance END
        AS broker_instance,
    o.match_step,
    o.choose_step,
    o.locate_step,
    o.decided_by
FROM routed AS d
LEFT JOIN {{ option_values }} AS o
    ON o.key_id = d.key_id AND o.group_rank = d.group_rank
    AND o.route_rank = d.route_rank AND o.db_rank = d.db_rank
