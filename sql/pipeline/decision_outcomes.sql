{#- pipeline resolve: the written decisions counted per outcome and deciding step (the
    closing line of the command). Input: {{ decisions }}. -#}
SELECT d.outcome, d.decided_by, COUNT(*) AS conversations
FROM {{ decisions }} AS d
GROUP BY d.outcome, d.decided_by
