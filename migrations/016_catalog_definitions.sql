-- 016: which definitions of sql/catalog/ (views and macros) the file holds, as a digest of
-- their text. An open for writing replaces them only when this pybroker's differ
-- (pybroker/storage.py): replacing them is DDL, each DDL a statement DuckDB must replay
-- from its write-ahead log after a kill, and an open that changes nothing writes nothing.
CREATE TABLE catalog_definitions (
    singleton     BOOLEAN   PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    digest        VARCHAR   NOT NULL,   -- SHA-256 of the rendered definitions, in order
    installed_at  TIMESTAMP NOT NULL
);
