{#- `pybroker bench wire --body-mb N`: the storage floor of one big body, a bare table of
    its parts (one row: the whole body; or rows of the wire's fragment size). -#}
CREATE TABLE body_floor (part_number INTEGER, part BLOB)
