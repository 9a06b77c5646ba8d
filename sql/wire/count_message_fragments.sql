-- P4.4: whether message_fragments holds any row (read at open): END CONVERSATION then
-- deletes the ending endpoint's (wire/delete_endpoint_fragments.sql).
SELECT count(*) FROM (SELECT 1 FROM message_fragments LIMIT 1)
