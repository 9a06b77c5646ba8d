"""The public API: Instance, Database, Conversation and the records they hand out."""
