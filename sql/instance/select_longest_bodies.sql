-- The longest message body each table of bodies holds or held, from DuckDB's statistics of
-- the column (no scan; "Max String Length: N", never less than the longest there now), so
-- the memory limit leaves room to read it back (pybroker/storage/store.py, BODY_ROOM).
SELECT
    (SELECT stats(m.message_body) FROM queue_messages AS m LIMIT 1),
    (SELECT stats(t.message_body) FROM transmission_queue AS t LIMIT 1),
    (SELECT stats(f.message_body) FROM message_fragments AS f LIMIT 1)
