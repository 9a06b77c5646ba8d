-- sys.dm_broker_findings: the findings of pybroker diagnose that this instance's own tables
-- decide, now, with diagnose's default thresholds (diagnose() in 44_diagnose.sql takes
-- others: SELECT * FROM diagnose(at_time := TIMESTAMP '...', leak_count := 10)).
CREATE OR REPLACE VIEW sys.dm_broker_findings AS
SELECT * FROM diagnose()
