{#- `pybroker bench wire --body-mb N`, storage floor: one part of the body (or all of it). -#}
INSERT INTO body_floor VALUES ($part_number, $part)
