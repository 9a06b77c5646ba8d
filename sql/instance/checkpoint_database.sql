-- Everything of an attached database written into its file, no log left beside it.
-- CHECKPOINT takes no bound parameter: the name is a quoted identifier (`identifier`).
CHECKPOINT {{ alias | identifier }}
