"""Conversation endpoints as data: the C1 state table, messages, system messages."""
