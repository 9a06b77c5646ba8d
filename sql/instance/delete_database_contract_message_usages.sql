-- DROP DATABASE, after its own objects were dropped: the system contracts' message types.
DELETE FROM service_contract_message_usages WHERE database_id = $database_id
