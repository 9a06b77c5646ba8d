-- `pybroker send`: what became of the message it sent (C1, C4): the state of its sending
-- side, with the error that ended it if any, and whether the message still waits in the
-- transmission queue, with why.
SELECT e.state, e.state_desc, e.error_code, e.error_description, e.far_service,
    e.far_broker_instance, e.service_contract_name,
    EXISTS (
        SELECT 1 FROM sys.transmission_queue AS t
        WHERE t.conversation_handle = e.conversation_handle
            AND t.message_sequence_number = $sequence
    ) AS is_waiting,
    (
        SELECT max(t.transmission_status) FROM sys.transmission_queue AS t
        WHERE t.conversation_handle = e.conversation_handle
            AND t.message_sequence_number = $sequence
    ) AS transmission_status
FROM sys.conversation_endpoints AS e
WHERE e.database_name = $database AND e.conversation_handle = CAST($handle AS UUID)
