{#-
  pipeline traffic: the conversations the transmission queue holds messages of, in the
  input form of resolve (one row per conversation handle of the sending side, P8): origin
  is the database whose transmission queue holds them, begin_time the oldest message's
  enqueue_time. resolve then gives the route each takes under the exported routing state,
  judged at that time (R1.4). A conversation pinned to a broker identifier (R5) mid-way
  keeps its lowest identifier. Inputs: {{ transmission_queue }}, {{ databases }}.
-#}
SELECT
    t.conversation_handle AS conversation_id,
    MIN(d.name) AS origin,
    MIN(t.to_service_name) AS service_name,
    MIN(t.to_broker_instance) AS broker_instance,
    MIN(t.enqueue_time) AS begin_time
FROM {{ transmission_queue }} AS t
JOIN {{ databases }} AS d ON d.database_id = t.database_id
GROUP BY t.conversation_handle
