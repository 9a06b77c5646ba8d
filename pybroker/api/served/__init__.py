"""The client of a served instance: the same API, run in the process that holds the file."""
