-- An attached database let go. DETACH takes no bound parameter: the name is a quoted
-- identifier made by the `identifier` filter.
DETACH {{ alias | identifier }}
