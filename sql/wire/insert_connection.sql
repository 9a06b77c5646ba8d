-- One row of sys.dm_broker_connections (C6).
INSERT INTO broker_connections (connection_id, peer_address, state_desc, is_accept,
    connect_time, login_time, last_activity_time, authentication_method, principal_name,
    login_state_desc, encryption_algorithm_desc, total_bytes_sent, total_bytes_received,
    total_fragments_sent, total_fragments_received, total_sends, total_receives,
    is_send_flow_controlled)
VALUES ($connection_id, $peer_address, $state_desc, $is_accept, $connect_time, $login_time,
    $last_activity_time, $authentication_method, $principal_name, $login_state_desc,
    $encryption_algorithm_desc, $total_bytes_sent, $total_bytes_received,
    $total_fragments_sent, $total_fragments_received, $total_sends, $total_receives,
    $is_send_flow_controlled)
