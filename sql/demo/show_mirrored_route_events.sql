-- `pybroker demo`, across processes: how a sender's view of a mirrored pair changed (R9).
SELECT event_class, subclass, description
FROM sys.broker_events
WHERE event_class = 'Broker:Mirrored Route State Changed'
ORDER BY event_id
