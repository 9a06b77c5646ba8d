"""RECEIVE ... WHERE conversation_handle = ... | conversation_group_id = ..., and GET
CONVERSATION GROUP (C3): the verbs that read one conversation or group of a queue straight
from the table. Messaging (engine.py) takes them from ReceiveWhereMixin; the plain RECEIVE
with its read-ahead stays in the engine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.arguments import uuid_text
from pybroker.conversation import message_parts
from pybroker.conversation.model import Message
from pybroker.errors import InvalidArgumentError
from pybroker.routing.definition import check_name

if TYPE_CHECKING:  # pragma: no cover
    import contextlib

    from pybroker.conversation.catalog import DatabaseCatalog, QueueSettings
    from pybroker.conversation.unit_of_work import UnitOfWork
    from pybroker.storage import Store


class ReceiveWhereMixin:
    """The filtered RECEIVE and GET CONVERSATION GROUP of Messaging."""

    _store: Store
    queue_watcher: Any  # engine.py's QueueWatcher (activation), while it runs

    if TYPE_CHECKING:  # pragma: no cover
        def current(self) -> UnitOfWork | None: ...
        def unit_of_work(self) -> contextlib.AbstractContextManager[UnitOfWork]: ...
        def catalog(self, database_id: int) -> DatabaseCatalog: ...
        def _queue_settings(self, database_id: int, queue: str) -> QueueSettings: ...
        def _enabled_queue_settings(self, database_id: int, queue: str) -> QueueSettings: ...
        def _wait_for_arrival(self, is_ready: Callable[[], bool], queue: str,
                              deadline: float) -> None: ...

    def _receive_where(
        self, database_id: int, queue: str, max_messages: int, timeout: float,
        conversation_handle: str | None, conversation_group_id: str | None,
    ) -> list[Message]:
        """RECEIVE ... WHERE conversation_handle = ... | conversation_group_id = ...: one
        statement on the table, never the read-ahead (which hands out whole groups in queue
        order); what was read ahead is dropped, as END CONVERSATION drops it, so the next
        RECEIVE reads the table again."""
        if conversation_handle is not None and conversation_group_id is not None:
            raise InvalidArgumentError(
                "RECEIVE takes conversation_handle or conversation_group_id, not both")
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or (
            max_messages < 1
        ):
            raise InvalidArgumentError(f"max_messages must be a positive whole number: "
                                       f"{max_messages!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise InvalidArgumentError(f"timeout must be seconds >= 0: {timeout!r}")
        params = {
            "database_id": database_id, "queue_name": queue,
            "conversation_handle": None if conversation_handle is None else uuid_text(
                "conversation_handle", conversation_handle),
            "conversation_group_id": None if conversation_group_id is None else uuid_text(
                "conversation_group_id", conversation_group_id),
        }
        self._queue_settings(database_id, queue)

        def take(uow: UnitOfWork) -> list[tuple[Any, ...]]:
            settings = self._enabled_queue_settings(database_id, queue)
            uow.forget_read_ahead()
            template = ("conversation/retain_received_messages_where.sql"
                        if settings.retention else "conversation/receive_messages_where.sql")
            rows = message_parts.with_bodies(
                uow, uow.sql(template, {**params, "max_messages": max_messages}),
                taken=not settings.retention)
            rows.sort(key=lambda r: r[0])
            uow.received.add((database_id, queue))
            return rows

        rows = self._take_when_ready(params, timeout, take)
        if self.queue_watcher is not None:
            self.queue_watcher.received((database_id, queue), len(rows))
        return [
            Message(r[1], r[2], r[3], r[4], r[5] if r[5] is not None else b"", r[6], r[7], r[0])
            for r in rows
        ]

    def _wait_where(self, params: dict[str, Any], deadline: float) -> None:
        """Wait until the queue holds a ready message the condition of a RECEIVE ... WHERE
        or a GET CONVERSATION GROUP keeps (``params``), or the deadline passes."""

        def is_ready() -> bool:
            ready = self._store.run("conversation/count_ready_messages_where.sql", params)
            return bool(ready and ready[0][0])

        self._wait_for_arrival(is_ready, params["queue_name"], deadline)

    def _take_when_ready(
        self, params: dict[str, Any], timeout: float,
        take: Callable[[UnitOfWork], list[tuple[Any, ...]]],
    ) -> list[tuple[Any, ...]]:
        """Run ``take`` in a unit of work (joining the caller's transaction), first waiting
        up to ``timeout`` seconds for a ready message the condition ``params`` keeps. Inside
        a transaction that has already done work there is no waiting: the store stays held."""
        deadline = time.monotonic() + timeout
        outer = self.current()
        can_wait = timeout > 0 and (outer is None or not outer.locked)
        while True:
            if can_wait:
                self._wait_where(params, deadline)
            with self.unit_of_work() as uow:
                uow.activate()
                rows = take(uow)
            if rows or not can_wait or outer is not None or time.monotonic() >= deadline:
                return rows

    # -- GET CONVERSATION GROUP ----------------------------------------------------------

    def get_conversation_group(
        self, database_id: int, queue: str, timeout: float
    ) -> str | None:
        """The conversation group the next RECEIVE from the queue takes, waiting up to
        ``timeout`` seconds for one (None: nothing is ready). One connection serves the
        instance, so no other transaction receives from it until this one ends, which is
        the lock SQL Server takes on the group."""
        check_name("queue", queue)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise InvalidArgumentError(f"timeout must be seconds >= 0: {timeout!r}")
        self._queue_settings(database_id, queue)
        params = {"database_id": database_id, "queue_name": queue,
                  "conversation_handle": None, "conversation_group_id": None}

        def take(uow: UnitOfWork) -> list[tuple[Any, ...]]:
            self._enabled_queue_settings(database_id, queue)
            # the flush in uow.sql writes out what this transaction already received
            return uow.sql("conversation/select_first_ready_group.sql", {
                "database_id": database_id, "queue_name": queue})

        rows = self._take_when_ready(params, timeout, take)
        return str(rows[0][0]) if rows else None
