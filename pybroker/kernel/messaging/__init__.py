"""The messaging engine: conversations, queues, the transmission queue, arrivals."""
