{#- `pybroker bench wire --body-mb N`, storage floor: one part of the body (or all of it),
    back: one part at a time, as a cursor over all of them fetches them all at once. -#}
SELECT part FROM body_floor WHERE part_number = $part_number
