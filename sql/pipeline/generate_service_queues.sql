{#- pipeline generate: one queue per user database, ON. Input: {{ params }}. -#}
SELECT
    CAST(q.database_id AS INTEGER) AS database_id,
    'PipelineQueue' AS name,
    TRUE AS is_receive_enabled,
    TRUE AS is_enqueue_enabled,
    CAST(make_timestamp(p.start_us) AS TIMESTAMP) AS create_date
FROM (VALUES (5), (6), (7)) AS q(database_id)
CROSS JOIN {{ params }} AS p
