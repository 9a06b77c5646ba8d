-- Every count the conversation hygiene rules read, in one pass over the conversation
-- endpoints: by database, state (C1), side and service, how many, how many of them were
-- created before $created_before (the leak threshold diagnose was given) and the oldest
-- create_date; a target DISCONNECTED_INBOUND (its initiator ended first, fire and forget)
-- by its initiator's service too (ended_first_from), NULL for every other endpoint.
SELECT e.database_name, e.state_desc, e.is_initiator, e.service_name,
    CASE WHEN NOT e.is_initiator AND e.state_desc = 'DISCONNECTED_INBOUND'
        THEN e.far_service END AS ended_first_from,
    count(*) AS endpoints, count(*) FILTER (WHERE e.create_date < $created_before) AS older,
    min(e.create_date) AS oldest
FROM sys.conversation_endpoints AS e
GROUP BY ALL
ORDER BY ALL
