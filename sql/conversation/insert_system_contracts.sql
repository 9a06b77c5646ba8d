-- C2: the system contracts of a new database (the same rows 002 and 025 give every database).
INSERT INTO service_contracts (database_id, name, is_system, create_date)
SELECT $database_id, c.name, TRUE, $now
FROM (VALUES
    ('DEFAULT'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice'),
    ('http://schemas.microsoft.com/SQL/Notifications/PostEventNotification')
) AS c (name)
