-- C2: the system message types of a new database (the same rows 002 and 025 give every database).
INSERT INTO message_types (database_id, name, validation, is_system, create_date)
SELECT $database_id, t.name, t.validation, TRUE, $now
FROM (VALUES
    ('DEFAULT', 'N'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog', 'E'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/Error', 'X'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer', 'E'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice/MissingRoute', 'X'),
    ('http://schemas.microsoft.com/SQL/Notifications/EventNotification', 'X')
) AS t (name, validation)
