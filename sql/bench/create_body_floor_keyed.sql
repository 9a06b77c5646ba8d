{#- `pybroker bench wire --body-mb N`: the storage floor of a body kept as the receiver
    keeps a message's fragments (migrations/010, 012): pieces under DuckDB's block size in
    a table with an index, read back one by one through it. -#}
CREATE TABLE body_floor (part_number INTEGER PRIMARY KEY, part BLOB)
