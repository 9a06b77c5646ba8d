"""RECEIVE ... WHERE conversation_handle = ... | conversation_group_id = ..., and GET
CONVERSATION GROUP (C3): the verbs that read one conversation or group of a queue straight
from the table; the plain RECEIVE with its read-ahead is receive.py's.

C7: RECEIVE ... WHERE on a group another transaction holds waits for it, within its
WAITFOR time-out (then it returns nothing, as a WAITFOR that found nothing does), or
without WAITFOR up to LOCK_WAIT_LIMIT (group_locking.py; then LockTimeoutError), and
then takes the group as the writer. GET CONVERSATION GROUP takes the first group no other
transaction holds, and in a transaction that has changed nothing reads it without the
store (Store.read_apart), so a worker's GET CONVERSATION GROUP runs beside the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.arguments import uuid_text
from pybroker.core.conversation.model import Message
from pybroker.core.routing.definition import check_name
from pybroker.errors import InvalidArgumentError, LockTimeoutError
from pybroker.kernel.messaging import message_parts
from pybroker.kernel.messaging.catalog_cache import CatalogCache
from pybroker.kernel.messaging.receive import (
    READY_GROUP,
    Receiving,
    check_receive,
    check_timeout,
    messages_of,
)

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork
    from pybroker.storage.store import Store


class ReceiveWhere:
    """The filtered RECEIVE and GET CONVERSATION GROUP of one instance's engine: waiting
    and taking as ``receiving`` does, counting in ``store``, the queues' settings from
    ``catalogs``."""

    def __init__(self, receiving: Receiving, store: Store, catalogs: CatalogCache,
                 queue_watcher: Callable[[], Any]) -> None:
        self._receiving = receiving
        self._store = store
        self._catalogs = catalogs
        self._queue_watcher = queue_watcher  # activation's, while it runs (or None)

    def receive(
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
        check_receive(max_messages, timeout)
        params = {
            "database_id": database_id, "queue_name": queue,
            "conversation_handle": None if conversation_handle is None else uuid_text(
                "conversation_handle", conversation_handle),
            "conversation_group_id": None if conversation_group_id is None else uuid_text(
                "conversation_group_id", conversation_group_id),
        }
        self._catalogs.queue_settings(database_id, queue)
        deadline = time.monotonic() + timeout if timeout > 0 else None

        def take(uow: UnitOfWork) -> list[tuple[Any, ...]]:
            settings = self._catalogs.enabled_queue_settings(database_id, queue)
            group = params["conversation_group_id"]
            if group is None:  # the conversation's group
                group = self._receiving.group_of(params["conversation_handle"], database_id)
            if group is not None:
                try:
                    uow.lock_group(database_id, group, deadline)
                except LockTimeoutError:
                    if deadline is None:
                        raise
                    return []  # WAITFOR ran out while another transaction held the group
                if not uow.has_changes:
                    found = self._receiving.take_where_apart(
                        uow, (database_id, queue), {**params, "conversation_group_id": group,
                                                    "max_messages": max_messages},
                        settings.retention)
                    if found is not None:
                        uow.received_from((database_id, queue), len(found))
                        return found
            uow.activate()
            uow.forget_read_ahead()
            template = ("conversation/retain_received_messages_where.sql"
                        if settings.retention else "conversation/receive_messages_where.sql")
            rows = message_parts.with_bodies(
                uow, uow.sql(template, {**params, "max_messages": max_messages}),
                taken=not settings.retention)
            rows.sort(key=lambda r: r[0])
            self._receiving.hold(uow, [r[0] for r in rows])
            uow.received_from((database_id, queue), len(rows))
            return rows

        rows = self._take_when_ready(params, timeout, take)
        watcher = self._queue_watcher()
        if watcher is not None:
            watcher.received((database_id, queue), len(rows))
        return messages_of(rows, self._receiving.priority_of(database_id))

    def _wait_where(self, params: dict[str, Any], deadline: float) -> None:
        """Wait until the queue holds a ready message the condition of a RECEIVE ... WHERE
        or a GET CONVERSATION GROUP keeps (``params``), or the deadline passes."""

        def is_ready() -> bool:
            ready = self._store.read_apart("conversation/count_ready_messages_where.sql",
                                           params)
            return bool(ready and ready[0][0])

        self._receiving.wait_for_arrival(is_ready, params["queue_name"], deadline)

    def _take_when_ready(
        self, params: dict[str, Any], timeout: float,
        take: Callable[[UnitOfWork], list[tuple[Any, ...]]],
    ) -> list[tuple[Any, ...]]:
        """``take`` once a ready message the condition ``params`` keeps is there, waiting
        up to ``timeout`` seconds for one (Receiving.take_when_ready)."""
        return self._receiving.take_when_ready(
            timeout, lambda deadline: self._wait_where(params, deadline), take)

    # -- GET CONVERSATION GROUP ----------------------------------------------------------

    def get_conversation_group(
        self, database_id: int, queue: str, timeout: float
    ) -> str | None:
        """The conversation group the next RECEIVE from the queue takes, waiting up to
        ``timeout`` seconds for one (None: nothing is ready). One connection serves the
        instance, so no other transaction receives from it until this one ends, which is
        the lock SQL Server takes on the group (C7): the first group no other transaction
        holds, locked."""
        check_name("queue", queue)
        check_timeout(timeout)
        self._catalogs.queue_settings(database_id, queue)
        params = {"database_id": database_id, "queue_name": queue,
                  "conversation_handle": None, "conversation_group_id": None}

        def take(uow: UnitOfWork) -> list[tuple[Any, ...]]:
            self._catalogs.enabled_queue_settings(database_id, queue)
            apart = not uow.has_changes
            may_take = self._receiving.may_take(uow, database_id)
            while True:
                found_params = {"database_id": database_id, "queue_name": queue,
                                **self._receiving.lock_filters(uow, database_id)}
                order = self._receiving.ready_group_order(database_id)
                if apart:
                    found = self._store.read_apart(READY_GROUP, found_params, **order)
                else:
                    uow.activate()
                    # the flush in uow.sql writes out what this transaction already received
                    found = uow.sql(READY_GROUP, found_params, **order)
                if not found or may_take(str(found[0][0])):
                    return found

        rows = self._take_when_ready(params, timeout, take)
        return str(rows[0][0]) if rows else None

