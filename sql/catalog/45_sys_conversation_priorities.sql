-- sys.conversation_priorities: the broker priorities of every database (CREATE BROKER
-- PRIORITY). pybroker keeps contracts and services by name: SQL Server's
-- service_contract_id and local_service_id are their names here; NULL matches any.
CREATE OR REPLACE VIEW sys.conversation_priorities AS
SELECT d.name AS database_name, p.priority_id, p.name, p.service_contract_name,
    p.local_service_name, p.remote_service_name, p.priority
FROM main.conversation_priorities AS p
JOIN main.databases AS d ON d.database_id = p.database_id
