-- C2: DEFAULT SENT BY ANY, the dynamic routing request contract (R8.1) and the event
-- notifications' (C8), as 002 and 025 give every database.
INSERT INTO service_contract_message_usages
    (database_id, contract_name, message_type_name, is_sent_by_initiator, is_sent_by_target)
SELECT $database_id, u.contract_name, u.message_type_name, u.by_initiator, u.by_target
FROM (VALUES
    ('DEFAULT', 'DEFAULT', TRUE, TRUE),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice',
     'http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice/MissingRoute',
     TRUE, FALSE),
    ('http://schemas.microsoft.com/SQL/Notifications/PostEventNotification',
     'http://schemas.microsoft.com/SQL/Notifications/EventNotification', TRUE, FALSE)
) AS u (contract_name, message_type_name, by_initiator, by_target)
