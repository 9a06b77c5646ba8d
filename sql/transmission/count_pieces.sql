-- Whether the transmission queue keeps any body as pieces (migrations/011): only then do
-- its deletes also delete pieces.
SELECT count(*) FROM transmission_queue_pieces
