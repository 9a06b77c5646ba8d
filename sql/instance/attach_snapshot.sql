-- A snapshot's new file attached for writing (pybroker/storage/snapshot.py). ATTACH takes no
-- bound parameter: the path is a string literal made by the `literal` filter, the alias a
-- quoted identifier made by the `identifier` filter. READ_WRITE: an instance opened
-- read-only would otherwise attach read-only too.
ATTACH {{ path | literal }} AS {{ alias | identifier }} (READ_WRITE)
