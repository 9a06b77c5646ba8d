"""``pybroker fuzz``: decoders fed generated inputs (T-SQL, frames, the wire)."""
