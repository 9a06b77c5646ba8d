"""Where an endpoint's messages go, now or later (C2, C4, C5, R4, R5): into a queue of this
instance, to the wire, or into the transmission queue to wait; a broker error back to the
sender; and the delay/retry loop that expires lifetimes, fires timers and tries waiting
transmissions again."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from pybroker.core.conversation import columns
from pybroker.core.conversation.endpoint import ConversationEndpoint
from pybroker.core.conversation.handles import new_handle
from pybroker.core.conversation.model import (
    STATUS_BROKER_DISABLED,
    STATUS_NO_ROUTE,
    STATUS_NO_TRANSPORT,
    STATUS_QUEUE_DISABLED,
    Outgoing,
    Router,
)
from pybroker.core.conversation.priorities import endpoint_priority
from pybroker.core.conversation.states import TRANSITIONS, transition
from pybroker.core.conversation.system_messages import (
    CONTRACT_NOT_SUPPORTED,
    DIALOG_TIMER,
    ENDPOINT_CLOSED_TEXT,
    ERROR,
    LIFETIME_EXPIRED,
    LIFETIME_TEXT,
    REMOTE_ENDPOINT_CLOSED,
    error_body,
    parse_error,
)
from pybroker.core.routing.engine import OUTSIDE
from pybroker.core.wire.dialog import backoff
from pybroker.errors import ConversationError
from pybroker.kernel.messaging import transmission_pieces
from pybroker.kernel.messaging.catalog import DatabaseCatalog
from pybroker.kernel.messaging.catalog_cache import CatalogCache
from pybroker.kernel.messaging.remote import Remote, RemoteDelivery
from pybroker.kernel.messaging.route_requests import RouteRequests
from pybroker.timestamps import to_utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.endpoint_cache import EndpointCache
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork

UNSEQUENCED = -1


@dataclass(slots=True)
class QueueTarget:
    """Where a message of an endpoint goes now: a queue of this instance."""

    catalog: DatabaseCatalog
    queue_name: str
    far: ConversationEndpoint | None  # None: the first message creates the target endpoint


class _Engine(Protocol):
    """What delivery needs of the messaging engine (engine.py's Messaging): public names."""

    retry_scale: float
    clock: Callable[[], float]  # epoch seconds
    endpoints: EndpointCache
    remote: RemoteDelivery
    route_requests: RouteRequests  # R2.4, R8

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]: ...

    def endpoint(self, handle: str, database_id: int | None = None) -> ConversationEndpoint: ...

    def now(self) -> datetime: ...

    def next_order(self) -> int: ...

    def note_deadline(self, uow: UnitOfWork, when: datetime | None) -> None: ...

    def set_next_deadline(self, deadline: datetime | None) -> None: ...


class Delivery:
    """Routing, delivery and the delay/retry loop of one instance's engine: ``catalogs``
    is the engine's catalog cache, ``route`` how the instance routes (Instance.route)."""

    def __init__(self, messaging: _Engine, catalogs: CatalogCache, route: Router) -> None:
        self._m = messaging
        self._catalogs = catalogs
        self._route = route

    def refresh_cached(self, ep: ConversationEndpoint) -> None:
        """What ``ep`` caches of the catalog (its permissions, route and far endpoint) is
        read again: the catalog changed since it was cached."""
        catalog = self._catalogs.catalog(ep.database_id)
        usages = catalog.contracts.get(ep.service_contract_name, {})
        index = 0 if ep.is_initiator else 1
        ep.permissions = {
            mtype: catalog.message_types.get(mtype, "N")
            for mtype, sent_by in usages.items() if sent_by[index]
        }
        ep.route = None
        ep.far_handle = None
        ep.epoch = self._catalogs.version

    # -- routing and delivery --------------------------------------------------------------

    def dispatch(self, uow: UnitOfWork, ep: ConversationEndpoint, messages: list[Outgoing]) -> None:
        uow.counts["sent", ep.database_id, ep.service_name] += len(messages)
        if uow.first_send is None:
            uow.first_send = time.monotonic()
        if ep.transmission_next_attempt is not None:  # earlier messages wait: keep order
            self._stage_transmission(uow, ep, messages, ep.transmission_status)
            return
        target = self.target(uow, ep)
        if target is None:
            return
        if isinstance(target, str):
            self._stage_transmission(uow, ep, messages, target)
            return
        if isinstance(target, Remote):
            self._m.remote.stage(uow, ep, messages, target)
            return
        self.deliver(uow, ep, target, messages)

    def target(self, uow: UnitOfWork,
               ep: ConversationEndpoint) -> QueueTarget | Remote | str | None:
        """Where ``ep``'s messages go now (R1.1: routed with its own database's table), or
        why they cannot go (a transmission status, C4), or None if ``ep`` was just told it
        cannot send at all (a broker error arrived in its queue)."""
        if ep.epoch != self._catalogs.version:
            self.refresh_cached(ep)
        if not self._catalogs.catalog(ep.database_id).broker_enabled:
            return STATUS_BROKER_DISABLED  # nothing leaves a database whose broker is off
        decision = ep.route
        if decision is None:
            # R5: once the far side has acknowledged, route with its broker identifier.
            broker = ep.far_broker_instance or ep.requested_broker_instance
            decision = self._route(
                ep.far_service, broker_instance=broker,
                origin=self._catalogs.catalog(ep.database_id).name)
            if (decision.outcome == "send" and self._m.remote.wire is not None
                    and self._m.remote.wire.is_own_address(decision.address or "")):
                # R7.2: the route leads to this instance itself: of remote origin from
                # here, routed again with msdb's table (R3.6: forwarding must be on to
                # send it anywhere but LOCAL)
                again = self._route(ep.far_service, broker_instance=broker, origin=OUTSIDE)
                if again.outcome == "send" and self._m.remote.wire.is_own_address(
                        again.address or ""):
                    return STATUS_NO_ROUTE  # msdb's route leads here too: a loop
                if again.route_request_due:  # R2.4 in msdb's table: msdb asks (R8)
                    self._m.route_requests.request(
                        uow, self._catalogs.catalog_named("msdb").database_id, ep.far_service)
                    return STATUS_NO_ROUTE  # not kept: routed again once answered
                decision = again
            ep.route = decision
        if decision.outcome == "send":
            if self._m.remote.wire is None:
                return STATUS_NO_TRANSPORT
            return Remote(decision.address, decision.mirror_address)
        if decision.outcome != "deliver":
            if decision.route_request_due:  # R2.4: DELAYED, and the routing service asked
                self._m.route_requests.request(uow, ep.database_id, ep.far_service)
            return STATUS_NO_ROUTE
        catalog = self._catalogs.catalog_named(decision.database)
        if not catalog.broker_enabled:
            return STATUS_BROKER_DISABLED
        queue_name = catalog.services.get(ep.far_service)
        if queue_name is None:
            return STATUS_NO_ROUTE
        far = self._far_endpoint(uow, ep, catalog)
        if far is None:
            if not ep.is_initiator:
                self.bounce(uow, ep, REMOTE_ENDPOINT_CLOSED, ENDPOINT_CLOSED_TEXT)
                return None
            if ep.service_contract_name not in catalog.service_contracts.get(
                ep.far_service, frozenset()
            ):
                self.bounce(uow, ep, CONTRACT_NOT_SUPPORTED, (
                    f"Target service '{ep.far_service}' does not support contract "
                    f"'{ep.service_contract_name}'."))
                return None
        queue = catalog.queues.get(queue_name)
        if queue is None or not queue.status:
            return STATUS_QUEUE_DISABLED  # P8, C3
        return QueueTarget(catalog, queue_name, far)

    def _far_endpoint(
        self, uow: UnitOfWork, ep: ConversationEndpoint, catalog: DatabaseCatalog
    ) -> ConversationEndpoint | None:
        """The other side in ``catalog``'s database, if it exists there."""
        if ep.far_handle is not None:
            far = self._m.endpoints.get(ep.far_handle)
            if far is not None:
                return far
            with contextlib.suppress(ConversationError):
                return self._m.endpoint(ep.far_handle)
            ep.far_handle = None
        if ep.is_initiator and ep.far_broker_instance is None:
            return None  # nothing delivered yet (R5 pins at the first delivery): no target
        rows = uow.sql("conversation/select_far_endpoint.sql", {
            "conversation_id": ep.conversation_id, "is_initiator": not ep.is_initiator,
            "database_id": catalog.database_id})
        if not rows:
            return None
        ep.far_handle = rows[0][0]
        return self._m.endpoint(rows[0][0])

    def deliver(
        self, uow: UnitOfWork, sender: ConversationEndpoint, target: QueueTarget,
        messages: list[Outgoing],
    ) -> None:
        """Into the target queue in this transaction (R4): the far endpoint applies each
        message's event (C1), takes each sequence number once (P3.2), and acknowledges at
        enqueue (P5.2), so nothing stays in the transmission queue."""
        catalog = target.catalog
        far = target.far
        now = self._m.now()
        if far is None:
            far = ConversationEndpoint((
                new_handle(), catalog.database_id, sender.conversation_id,
                str(uuid.uuid4()), False, sender.far_service, sender.service_contract_name,
                sender.service_name,
                self._catalogs.catalog(sender.database_id).broker_instance, None,
                None, sender.lifetime, None, 0, 0, None, 0, 0, 0, None, None, None,
                endpoint_priority(catalog.priorities, sender.service_contract_name,
                                  sender.far_service, sender.service_name), now, "",
            ), persisted=False)
        retained_queue = self.retained_queue(sender)
        for seq, mtype, validation, body, is_end, is_error in messages:
            if seq < far.receive_sequence:
                continue  # P3.2: a duplicate is discarded
            event = (
                "receive_end_dialog" if is_end
                else "receive_error" if is_error else "receive_message")
            t = TRANSITIONS.get((far.role, far.state, event))
            if t is None:  # the far side cannot take it: tell the sender (never raise here)
                self.bounce(uow, sender, REMOTE_ENDPOINT_CLOSED, ENDPOINT_CLOSED_TEXT)
                return
            if far.state is None:  # the first message creates the target endpoint (C1)
                self._m.endpoints[far.conversation_handle] = far
                self._m.note_deadline(uow, far.lifetime)
            far.state = t.state
            far.receive_sequence = seq + 1
            if is_error:
                far.error_code, far.error_description = parse_error(body)
                self.drop_transmissions(uow, far)  # C4: an error ends its sending
            uow.touch(far)
            if t.enqueue:
                uow.enqueue((
                    catalog.database_id, target.queue_name, self._m.next_order(), 1,
                    far.priority, far.conversation_group_id, far.conversation_handle, seq,
                    far.service_name, far.service_contract_name, mtype, validation, body, now))
            if retained_queue is not None and not (is_end or is_error):
                self.retain_sent(uow, sender, retained_queue, seq, mtype, validation, body,
                                  now)
            sender.first_unacked_send_sequence = seq + 1  # P5.2: acknowledged at enqueue
            if (is_end or is_error) and sender.state == "DO":
                sender.state = transition(sender.role, "DO", "acknowledged_end").state
        if sender.far_broker_instance != catalog.broker_instance:
            sender.far_broker_instance = catalog.broker_instance  # R5: pinned from now on
            sender.route = None
        sender.far_handle = far.conversation_handle
        far.far_handle = sender.conversation_handle
        uow.touch(sender)

    def retained_queue(self, ep: ConversationEndpoint) -> str | None:
        """The queue of ``ep``'s own service when it has RETENTION = ON (C3): what the
        service sends is kept there until the conversation ends; None otherwise."""
        catalog = self._catalogs.catalog(ep.database_id)
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return None
        settings = catalog.queues.get(queue)
        return queue if settings is not None and settings.retention else None

    def retain_sent(
        self, uow: UnitOfWork, ep: ConversationEndpoint, queue: str, seq: int, mtype: str,
        validation: str, body: bytes, now: datetime,
    ) -> None:
        """C3: a copy of a user message ``ep`` sent, in its own queue with status 3
        (retained sent), written in the transaction that sends it. The same row whether
        the far side is a queue of this instance (deliver) or across the network
        (RemoteDelivery.stage)."""
        uow.enqueue((
            ep.database_id, queue, self._m.next_order(), 3, ep.priority,
            ep.conversation_group_id, ep.conversation_handle, seq, ep.service_name,
            ep.service_contract_name, mtype, validation, body, now))

    def _stage_transmission(
        self, uow: UnitOfWork, ep: ConversationEndpoint, messages: list[Outgoing], status: str
    ) -> None:
        """C4, P8: the messages wait in the sending database's transmission queue."""
        now = self._m.now()
        to_broker = ep.far_broker_instance or ep.requested_broker_instance
        for seq, mtype, validation, body, is_end, is_error in messages:
            uow.tx_rows.append((
                ep.database_id, ep.conversation_handle, seq, len(body), ep.far_service,
                to_broker, ep.service_name, ep.service_contract_name, mtype, validation,
                is_end, is_error, ep.priority, now, body, status))
        ep.transmission_status = status
        if ep.transmission_next_attempt is None:
            ep.transmission_retry_count = 0
            ep.transmission_next_attempt = now + timedelta(seconds=self.backoff(0))
            self._m.note_deadline(uow, ep.transmission_next_attempt)
        uow.touch(ep)

    def backoff(self, retry_count: int) -> float:
        """C5: seconds before the next attempt after ``retry_count`` failed ones."""
        return backoff(retry_count, self._m.retry_scale)

    def drop_transmissions(self, uow: UnitOfWork, ep: ConversationEndpoint) -> None:
        handle = ep.conversation_handle
        uow.tx_rows = [r for r in uow.tx_rows if r[1] != handle]
        if ep.persisted:
            transmission_pieces.delete_transmissions_of(uow, handle)
        ep.transmission_next_attempt = None
        ep.transmission_retry_count = 0
        ep.transmission_status = ""
        uow.touch(ep)
        self._m.remote.forget(ep)

    def bounce(self, uow: UnitOfWork, ep: ConversationEndpoint, code: int,
               description: str) -> None:
        """A broker error about ``ep`` (P3.3, unsequenced) arrives in its own queue."""
        t = TRANSITIONS.get((ep.role, ep.state, "receive_error"))
        self.drop_transmissions(uow, ep)
        if t is None:
            return
        ep.state = t.state
        ep.error_code, ep.error_description = code, description
        if t.enqueue:
            self._stage_local(uow, ep, ERROR, "X", error_body(code, description))
        uow.touch(ep)

    def _stage_local(
        self, uow: UnitOfWork, ep: ConversationEndpoint, mtype: str, validation: str, body: bytes
    ) -> None:
        """An unsequenced message of the broker into the endpoint's own queue."""
        catalog = self._catalogs.catalog(ep.database_id)
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return  # the service is gone; nothing can receive it
        uow.enqueue((
            ep.database_id, queue, self._m.next_order(), 1, ep.priority,
            ep.conversation_group_id, ep.conversation_handle, UNSEQUENCED, ep.service_name,
            ep.service_contract_name, mtype, validation, body, self._m.now()))

    # -- the delay/retry loop ------------------------------------------------------------

    def run_pending(self, now: float | None = None, *, retry_all: bool = False) -> int:
        """Do what is due at ``now`` (epoch seconds; default the instance's clock): expire
        lifetimes (C2 -8489), fire timers (DialogTimer), retry waiting transmissions (C5);
        ``retry_all`` retries every waiting transmission at once (after a catalog change).
        Returns how many endpoints it acted on."""
        at = self._m.clock() if now is None else now
        now_dt = to_utc_datetime(at)
        with self._m.unit_of_work() as uow:
            uow.activate()
            rows = uow.sql("conversation/select_due_endpoints.sql",
                           {"now": now_dt, "retry_all": retry_all})
            retries: list[ConversationEndpoint] = []
            for handle, expired, timer_due, retry_due in rows:
                ep = self._m.endpoint(handle)
                if expired:
                    self._expire(uow, ep)
                if timer_due and ep.dialog_timer is not None:
                    ep.dialog_timer = None
                    uow.touch(ep)
                    if ep.state != "CD":
                        self._stage_local(uow, ep, DIALOG_TIMER, "E", b"")
                if retry_due and ep.transmission_next_attempt is not None:
                    retries.append(ep)
            if retries:
                self._retry(uow, retries, now_dt)
            self._m.route_requests.run(uow, now_dt)  # R8.2
            if retry_all:
                self._m.remote.release_inbound(uow)
            self._m.remote.flush_events(uow)
            uow.flush()
            self._m.set_next_deadline(uow.sql("conversation/select_next_deadline.sql", {})[0][0])
        return len(rows)

    def _expire(self, uow: UnitOfWork, ep: ConversationEndpoint) -> None:
        """C2: the lifetime passed; this side ends with error -8489 (each side of a local
        conversation carries the same lifetime, so both sides end)."""
        t = transition(ep.role, ep.state, "lifetime_expired")
        self.drop_transmissions(uow, ep)
        ep.state = t.state
        if t.state == "ER":
            ep.error_code = LIFETIME_EXPIRED
            ep.error_description = LIFETIME_TEXT
            self._stage_local(uow, ep, ERROR, "X", error_body(LIFETIME_EXPIRED, LIFETIME_TEXT))
        uow.touch(ep)

    def _retry(self, uow: UnitOfWork, endpoints: list[ConversationEndpoint], now: datetime) -> None:
        deliverable: list[tuple[ConversationEndpoint, QueueTarget]] = []
        remote: list[tuple[ConversationEndpoint, Remote]] = []
        failing: dict[str, list[str]] = {}
        for ep in endpoints:
            ep.route = None  # DELAYED and failed conversations are routed again
            waiting_status = ep.transmission_status
            ep.transmission_next_attempt = None  # let target() decide afresh
            target = self.target(uow, ep)
            if target is None:
                continue  # bounced: its transmissions were dropped
            if isinstance(target, Remote):
                remote.append((ep, target))
            elif isinstance(target, str):
                ep.transmission_retry_count += 1
                ep.transmission_next_attempt = now + timedelta(
                    seconds=self.backoff(ep.transmission_retry_count))
                ep.transmission_status = target
                uow.touch(ep)
                if target != waiting_status:
                    failing.setdefault(target, []).append(ep.conversation_handle)
            else:
                deliverable.append((ep, target))
        for status, handles in failing.items():
            uow.sql("conversation/update_transmission_status.sql", {
                "conversation_handle": columns.guids(handles), "transmission_status": status})
        if remote:
            self._m.remote.resubmit(uow, remote)
        if not deliverable:
            return
        handles = columns.guids(ep.conversation_handle for ep, _ in deliverable)
        rows = transmission_pieces.with_bodies(uow, uow.sql(
            "conversation/select_transmission_queue_of.sql", {"conversation_handle": handles}))
        transmission_pieces.delete_transmissions_of(uow, handles)
        waiting: dict[str, list[Outgoing]] = {}
        for handle, seq, mtype, validation, body, is_end, is_error in rows:
            waiting.setdefault(handle, []).append(
                (seq, mtype, validation, body or b"", is_end, is_error))
        for ep, target in deliverable:
            ep.transmission_retry_count = 0
            ep.transmission_status = ""
            uow.touch(ep)
            messages = waiting.get(ep.conversation_handle, [])
            if messages:
                self.deliver(uow, ep, target, messages)
