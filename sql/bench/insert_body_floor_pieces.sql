{#- `pybroker bench wire --body-mb N`, storage floor: a run of pieces of the body in one
    statement, as the receiver keeps a fragment (wire/insert_message_fragment_pieces.sql):
    $part_numbers and $parts are lists of the same length. -#}
INSERT INTO body_floor
SELECT unnest($part_numbers::INTEGER[]), unnest($parts::BLOB[])
