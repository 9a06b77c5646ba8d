-- sys.service_message_types: message types with SQL Server's validation codes (C2):
-- N NONE, E EMPTY, X XML (VALIDATION = WELL_FORMED_XML).
CREATE OR REPLACE VIEW sys.service_message_types AS
SELECT d.name AS database_name, t.name, t.validation,
    CASE t.validation WHEN 'N' THEN 'NONE' WHEN 'E' THEN 'EMPTY' ELSE 'XML' END
        AS validation_desc,
    t.is_system, t.create_date
FROM main.message_types AS t
JOIN main.databases AS d ON d.database_id = t.database_id
