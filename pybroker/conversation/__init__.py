"""Conversations of one instance: endpoints (C1), messages, queues, the transmission queue
and the delay/retry loop (C2-C5, P3, P8)."""

from pybroker.conversation.api import Conversation, Message

__all__ = ["Conversation", "Message"]
