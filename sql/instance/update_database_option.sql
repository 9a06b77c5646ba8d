-- ALTER DATABASE ... SET ENABLE_BROKER | DISABLE_BROKER | NEW_BROKER | TRUSTWORTHY |
-- HONOR_BROKER_PRIORITY: a NULL argument leaves its column as it is.
UPDATE databases SET
    is_broker_enabled = COALESCE($is_broker_enabled, is_broker_enabled),
    service_broker_guid = COALESCE($service_broker_guid, service_broker_guid),
    is_trustworthy_on = COALESCE($is_trustworthy_on, is_trustworthy_on),
    is_honor_broker_priority_on = COALESCE($is_honor_broker_priority_on,
                                           is_honor_broker_priority_on)
WHERE database_id = $database_id
