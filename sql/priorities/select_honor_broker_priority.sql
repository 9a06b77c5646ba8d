-- Whether a database honours its broker priorities (ALTER DATABASE ... SET
-- HONOR_BROKER_PRIORITY ON; NULL is OFF, migrations/022).
SELECT COALESCE(d.is_honor_broker_priority_on, FALSE) FROM databases AS d
WHERE d.database_id = $database_id
