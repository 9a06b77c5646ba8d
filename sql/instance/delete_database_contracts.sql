-- DROP DATABASE, after its own objects were dropped: the system contracts (C2).
DELETE FROM service_contracts WHERE database_id = $database_id
