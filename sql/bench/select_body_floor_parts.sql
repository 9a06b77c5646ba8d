{#- `pybroker bench wire --body-mb N`, storage floor: a run of pieces of the body back in
    one statement, as RECEIVE reads a kept body (wire/select_message_pieces.sql). -#}
SELECT part FROM body_floor
WHERE part_number BETWEEN $first_part_number AND $last_part_number
ORDER BY part_number
