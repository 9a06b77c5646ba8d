-- sys.services: services with their database and queue, and the contracts they accept.
CREATE OR REPLACE VIEW sys.services AS
SELECT d.name AS database_name, s.name, s.queue_name, s.create_date,
    COALESCE((SELECT list(u.contract_name ORDER BY u.contract_name)
              FROM main.service_contract_usages AS u
              WHERE u.database_id = s.database_id AND u.service_name = s.name),
             CAST([] AS VARCHAR[])) AS contracts
FROM main.services AS s
JOIN main.databases AS d ON d.database_id = s.database_id
