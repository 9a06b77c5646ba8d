-- sys.conversation_endpoints: one row per side of every conversation held here (C1), with
-- the dialog protocol's sequence and acknowledgement state (P3, P5) and retry state (C5).
CREATE OR REPLACE VIEW sys.conversation_endpoints AS
SELECT d.name AS database_name, e.conversation_handle, e.conversation_id, e.is_initiator,
    e.service_name, e.service_contract_name, e.conversation_group_id, e.lifetime, e.state,
    CASE e.state
        WHEN 'SO' THEN 'STARTED_OUTBOUND' WHEN 'SI' THEN 'STARTED_INBOUND'
        WHEN 'CO' THEN 'CONVERSING' WHEN 'DI' THEN 'DISCONNECTED_INBOUND'
        WHEN 'DO' THEN 'DISCONNECTED_OUTBOUND' WHEN 'ER' THEN 'ERROR'
        WHEN 'CD' THEN 'CLOSED' END AS state_desc,
    e.far_service, e.far_broker_instance, e.dialog_timer, e.send_sequence,
    e.first_unacked_send_sequence, e.end_dialog_sequence, e.receive_sequence,
    e.receive_sequence_frag, e.priority, e.error_code, e.error_description,
    e.transmission_retry_count, e.transmission_next_attempt, e.create_date
FROM main.conversation_endpoints AS e
JOIN main.databases AS d ON d.database_id = e.database_id
