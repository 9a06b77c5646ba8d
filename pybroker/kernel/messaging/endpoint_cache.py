"""The messaging engine's cache of conversation endpoints, bounded (SPEC P7).

Service Broker keeps an in-memory transmission object only for active conversation
endpoints and writes inactive ones out in batches to free memory (P7). pybroker writes every
endpoint change at commit anyway (group commit, engine.py), so an endpoint that no open unit
of work has touched is exactly what the file holds: leaving it out of memory loses nothing,
and the next use reads it back with one point query. The cache therefore keeps the most
recently used endpoints, up to ``capacity``, and lets the rest go when a unit of work ends.

Recency is what units of work touch (send, receive, end, timers, deliveries): the engine
calls ``used`` with those handles at commit, then ``trim``. An endpoint touched by an open
unit of work (UnitOfWork.touched/new/dirty) may hold changes the file has not yet seen, so
it is never let go: ``trim`` takes the handles to keep.

The transmission state of an endpoint (P7's transmission object: retry count, next
attempt, status, and what the wire keeps per dialog) lives on ConversationEndpoint and is written at
commit like the rest, so it follows the same bound: per-endpoint state kept anywhere else
in memory would have to be let go here too.

Memory is then about ``capacity`` endpoints (~1 KB each with their cached route, far handle
and permissions) however many conversations the file holds; idle ones cost only their
rows in DuckDB.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING

from pybroker.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.endpoint import ConversationEndpoint

DEFAULT_ENDPOINT_CACHE = 10_000  # endpoints; ~10 MB


def check_capacity(capacity: object) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise InvalidArgumentError(
            f"endpoint_cache must be a whole number of endpoints, at least 1: {capacity!r}")
    return capacity


class EndpointCache(OrderedDict[str, "ConversationEndpoint"]):
    """Endpoints by conversation handle, least recently used first. A dict to the engine
    (get, [], pop, clear), plus ``used`` and ``trim``."""

    def __init__(self, capacity: int = DEFAULT_ENDPOINT_CACHE) -> None:
        super().__init__()
        self.capacity = check_capacity(capacity)

    def used(self, handles: Iterable[str]) -> None:
        """These endpoints were just used: they go last."""
        move = self.move_to_end
        for handle in handles:
            if handle in self:
                move(handle)

    def trim(self, keep: Container[str] = ()) -> int:
        """Let the least recently used endpoints go, down to ``capacity``, except those in
        ``keep`` (touched by an open unit of work). Returns how many went."""
        excess = len(self) - self.capacity
        if excess <= 0:
            return 0
        gone = skipped = 0
        limit = len(self)  # each entry is looked at once at most
        while excess > 0 and gone + skipped < limit:
            handle, ep = self.popitem(last=False)
            if handle in keep:
                self[handle] = ep  # back, as the most recent
                skipped += 1
                continue
            gone += 1
            excess -= 1
        return gone
