{#- `pybroker bench wire --body-mb N`, storage floor: the body stored whole, back. -#}
SELECT part FROM body_floor WHERE part_number = 0
