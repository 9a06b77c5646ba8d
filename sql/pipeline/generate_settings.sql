{#- pipeline generate: forwarding on (R7.3), so msdb's forwarding routes send. -#}
SELECT TRUE AS is_forwarding_enabled, CAST(10 AS INTEGER) AS forwarding_size_mb
FROM {{ params }} AS p
