-- How much of the write-ahead log DuckDB lets grow before it checkpoints the file
-- (pybroker/storage/store.py: checkpoint_threshold()).
SET checkpoint_threshold = $threshold
