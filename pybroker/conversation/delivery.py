"""Where an endpoint's messages go, now or later (C2, C4, C5, R4, R5): into a queue of this
instance, to the wire, or into the transmission queue to wait; a broker error back to the
sender; and the delay/retry loop that expires lifetimes, fires timers and tries waiting
transmissions again. Messaging (engine.py) takes these methods from DeliveryMixin."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pybroker.conversation import columns, transmission_pieces
from pybroker.conversation.catalog import DatabaseCatalog
from pybroker.conversation.endpoint import Endpoint
from pybroker.conversation.handles import new_handle
from pybroker.conversation.model import (
    STATUS_NO_ROUTE,
    STATUS_NO_TRANSPORT,
    STATUS_QUEUE_DISABLED,
    Outgoing,
)
from pybroker.conversation.remote import Remote
from pybroker.conversation.route_requests import RouteRequests
from pybroker.conversation.states import TRANSITIONS, transition
from pybroker.conversation.system_messages import (
    _ENDPOINT_CLOSED_TEXT,
    _LIFETIME_TEXT,
    CONTRACT_NOT_SUPPORTED,
    DIALOG_TIMER,
    ERROR,
    LIFETIME_EXPIRED,
    REMOTE_ENDPOINT_CLOSED,
    _parse_error,
    error_body,
)
from pybroker.errors import ConversationError
from pybroker.routing.engine import OUTSIDE
from pybroker.timestamps import to_utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.conversation.unit_of_work import UnitOfWork

UNSEQUENCED = -1
BACKOFF = (4.0, 8.0, 16.0, 32.0, 64.0)  # C5, seconds before scaling


@dataclass(slots=True)
class _Delivery:
    """Where a message of an endpoint goes now: a queue of this instance."""

    catalog: DatabaseCatalog
    queue_name: str
    far: Endpoint | None  # None: the first message creates the target endpoint


class DeliveryMixin:
    """The routing, delivery and delay/retry methods of Messaging (engine.py)."""

    route_requests: RouteRequests  # R2.4, R8: made by Messaging

    # -- routing and delivery --------------------------------------------------------------

    def _dispatch(self, uow: UnitOfWork, ep: Endpoint, messages: list[Outgoing]) -> None:
        if ep.transmission_next_attempt is not None:  # earlier messages wait: keep order
            self._stage_transmission(uow, ep, messages, ep.transmission_status)
            return
        target = self._target(uow, ep)
        if target is None:
            return
        if isinstance(target, str):
            self._stage_transmission(uow, ep, messages, target)
            return
        if isinstance(target, Remote):
            self.remote.stage(uow, ep, messages, target)
            return
        self._deliver(uow, ep, target, messages)

    def _target(self, uow: UnitOfWork, ep: Endpoint) -> _Delivery | Remote | str | None:
        """Where ``ep``'s messages go now (R1.1: routed with its own database's table), or
        why they cannot go (a transmission status, C4), or None if ``ep`` was just told it
        cannot send at all (a broker error arrived in its queue)."""
        if ep.epoch != self._epoch:
            self._refresh_cached(ep)
        decision = ep.route
        if decision is None:
            # R5: once the far side has acknowledged, route with its broker identifier.
            broker = ep.far_broker_instance or ep.requested_broker_instance
            decision = self._route(
                ep.far_service, broker_instance=broker,
                origin=self.catalog(ep.database_id).name)
            if (decision.outcome == "send" and self.remote.wire is not None
                    and self.remote.wire.is_own_address(decision.address or "")):
                # R7.2: the route leads to this instance itself: of remote origin from
                # here, routed again with msdb's table (R3.6: forwarding must be on to
                # send it anywhere but LOCAL)
                again = self._route(ep.far_service, broker_instance=broker, origin=OUTSIDE)
                if again.outcome == "send" and self.remote.wire.is_own_address(
                        again.address or ""):
                    return STATUS_NO_ROUTE  # msdb's route leads here too: a loop
                if again.route_request_due:  # R2.4 in msdb's table: msdb asks (R8)
                    self.route_requests.request(
                        uow, self.catalog_named("msdb").database_id, ep.far_service)
                    return STATUS_NO_ROUTE  # not kept: routed again once answered
                decision = again
            ep.route = decision
        if decision.outcome == "send":
            if self.remote.wire is None:
                return STATUS_NO_TRANSPORT
            return Remote(decision.address, decision.mirror_address)
        if decision.outcome != "deliver":
            if decision.route_request_due:  # R2.4: DELAYED, and the routing service asked
                self.route_requests.request(uow, ep.database_id, ep.far_service)
            return STATUS_NO_ROUTE
        catalog = self.catalog_named(decision.database)
        queue_name = catalog.services.get(ep.far_service)
        if queue_name is None:
            return STATUS_NO_ROUTE
        far = self._far_endpoint(uow, ep, catalog)
        if far is None:
            if not ep.is_initiator:
                self._bounce(uow, ep, REMOTE_ENDPOINT_CLOSED, _ENDPOINT_CLOSED_TEXT)
                return None
            if ep.service_contract_name not in catalog.service_contracts.get(
                ep.far_service, frozenset()
            ):
                self._bounce(uow, ep, CONTRACT_NOT_SUPPORTED, (
                    f"Target service '{ep.far_service}' does not support contract "
                    f"'{ep.service_contract_name}'."))
                return None
        queue = catalog.queues.get(queue_name)
        if queue is None or not queue.status:
            return STATUS_QUEUE_DISABLED  # P8, C3
        return _Delivery(catalog, queue_name, far)

    def _far_endpoint(
        self, uow: UnitOfWork, ep: Endpoint, catalog: DatabaseCatalog
    ) -> Endpoint | None:
        """The other side in ``catalog``'s database, if it exists there."""
        if ep.far_handle is not None:
            far = self._endpoints.get(ep.far_handle)
            if far is not None:
                return far
            with contextlib.suppress(ConversationError):
                return self.endpoint(ep.far_handle)
            ep.far_handle = None
        if ep.is_initiator and ep.far_broker_instance is None:
            return None  # nothing delivered yet (R5 pins at the first delivery): no target
        rows = uow.sql("conversation/select_far_endpoint.sql", {
            "conversation_id": ep.conversation_id, "is_initiator": not ep.is_initiator,
            "database_id": catalog.database_id})
        if not rows:
            return None
        ep.far_handle = rows[0][0]
        return self.endpoint(rows[0][0])

    def _deliver(
        self, uow: UnitOfWork, sender: Endpoint, target: _Delivery, messages: list[Outgoing]
    ) -> None:
        """Into the target queue in this transaction (R4): the far endpoint applies each
        message's event (C1), takes each sequence number once (P3.2), and acknowledges at
        enqueue (P5.2), so nothing stays in the transmission queue."""
        catalog = target.catalog
        far = target.far
        now = self._now()
        if far is None:
            far = Endpoint((
                new_handle(), catalog.database_id, sender.conversation_id,
                str(uuid.uuid4()), False, sender.far_service, sender.service_contract_name,
                sender.service_name, self.catalog(sender.database_id).broker_instance, None,
                None, sender.lifetime, None, 0, 0, None, 0, 0, 0, None, None, None,
                sender.priority, now, "",
            ), persisted=False)
        retained_queue = self._retained_queue(sender)
        for seq, mtype, validation, body, is_end, is_error in messages:
            if seq < far.receive_sequence:
                continue  # P3.2: a duplicate is discarded
            event = (
                "receive_end_dialog" if is_end
                else "receive_error" if is_error else "receive_message")
            t = TRANSITIONS.get((far.role, far.state, event))
            if t is None:  # the far side cannot take it: tell the sender (never raise here)
                self._bounce(uow, sender, REMOTE_ENDPOINT_CLOSED, _ENDPOINT_CLOSED_TEXT)
                return
            if far.state is None:  # the first message creates the target endpoint (C1)
                self._endpoints[far.conversation_handle] = far
                self._note_deadline(uow, far.lifetime)
            far.state = t.state
            far.receive_sequence = seq + 1
            if is_error:
                far.error_code, far.error_description = _parse_error(body)
                self._drop_transmissions(uow, far)  # C4: an error ends its sending
            uow.touch(far)
            if t.enqueue:
                uow.enqueue((
                    catalog.database_id, target.queue_name, self._next_order(), 1,
                    far.priority, far.conversation_group_id, far.conversation_handle, seq,
                    far.service_name, far.service_contract_name, mtype, validation, body, now))
            if retained_queue is not None and not (is_end or is_error):
                self._retain_sent(uow, sender, retained_queue, seq, mtype, validation, body,
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

    def _retained_queue(self, ep: Endpoint) -> str | None:
        """The queue of ``ep``'s own service when it has RETENTION = ON (C3): what the
        service sends is kept there until the conversation ends; None otherwise."""
        catalog = self.catalog(ep.database_id)
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return None
        settings = catalog.queues.get(queue)
        return queue if settings is not None and settings.retention else None

    def _retain_sent(
        self, uow: UnitOfWork, ep: Endpoint, queue: str, seq: int, mtype: str,
        validation: str, body: bytes, now: datetime,
    ) -> None:
        """C3: a copy of a user message ``ep`` sent, in its own queue with status 3
        (retained sent), written in the transaction that sends it. The same row whether
        the far side is a queue of this instance (_deliver) or across the network
        (RemoteDelivery.stage)."""
        uow.enqueue((
            ep.database_id, queue, self._next_order(), 3, ep.priority,
            ep.conversation_group_id, ep.conversation_handle, seq, ep.service_name,
            ep.service_contract_name, mtype, validation, body, now))

    def _stage_transmission(
        self, uow: UnitOfWork, ep: Endpoint, messages: list[Outgoing], status: str
    ) -> None:
        """C4, P8: the messages wait in the sending database's transmission queue."""
        now = self._now()
        to_broker = ep.far_broker_instance or ep.requested_broker_instance
        for seq, mtype, validation, body, is_end, is_error in messages:
            uow.tx_rows.append((
                ep.database_id, ep.conversation_handle, seq, len(body), ep.far_service,
                to_broker, ep.service_name, ep.service_contract_name, mtype, validation,
                is_end, is_error, ep.priority, now, body, status))
        ep.transmission_status = status
        if ep.transmission_next_attempt is None:
            ep.transmission_retry_count = 0
            ep.transmission_next_attempt = now + timedelta(seconds=self._backoff(0))
            self._note_deadline(uow, ep.transmission_next_attempt)
        uow.touch(ep)

    def _backoff(self, retry_count: int) -> float:
        return BACKOFF[min(retry_count, len(BACKOFF) - 1)] * self.retry_scale  # C5

    def _drop_transmissions(self, uow: UnitOfWork, ep: Endpoint) -> None:
        handle = ep.conversation_handle
        uow.tx_rows = [r for r in uow.tx_rows if r[1] != handle]
        if ep.persisted:
            uow.sql("conversation/delete_transmission_queue_of.sql",
                    {"conversation_handle": handle})
            transmission_pieces.delete_of(uow, {"conversation_handle": handle})
        ep.transmission_next_attempt = None
        ep.transmission_retry_count = 0
        ep.transmission_status = ""
        uow.touch(ep)
        self.remote.forget(ep)

    def _bounce(self, uow: UnitOfWork, ep: Endpoint, code: int, description: str) -> None:
        """A broker error about ``ep`` (P3.3, unsequenced) arrives in its own queue."""
        t = TRANSITIONS.get((ep.role, ep.state, "receive_error"))
        self._drop_transmissions(uow, ep)
        if t is None:
            return
        ep.state = t.state
        ep.error_code, ep.error_description = code, description
        if t.enqueue:
            self._stage_local(uow, ep, ERROR, "X", error_body(code, description))
        uow.touch(ep)

    def _stage_local(
        self, uow: UnitOfWork, ep: Endpoint, mtype: str, validation: str, body: bytes
    ) -> None:
        """An unsequenced message of the broker into the endpoint's own queue."""
        catalog = self.catalog(ep.database_id)
        queue = catalog.services.get(ep.service_name)
        if queue is None:
            return  # the service is gone; nothing can receive it
        uow.enqueue((
            ep.database_id, queue, self._next_order(), 1, ep.priority,
            ep.conversation_group_id, ep.conversation_handle, UNSEQUENCED, ep.service_name,
            ep.service_contract_name, mtype, validation, body, self._now()))

    # -- the delay/retry loop ------------------------------------------------------------

    def run_pending(self, now: float | None = None, *, retry_all: bool = False) -> int:
        """Do what is due at ``now`` (epoch seconds; default the instance's clock): expire
        lifetimes (C2 -8489), fire timers (DialogTimer), retry waiting transmissions (C5);
        ``retry_all`` retries every waiting transmission at once (after a catalog change).
        Returns how many endpoints it acted on."""
        at = self._clock() if now is None else now
        now_dt = to_utc_datetime(at)
        with self.unit_of_work() as uow:
            uow.activate()
            rows = uow.sql("conversation/select_due_endpoints.sql",
                           {"now": now_dt, "retry_all": retry_all})
            retries: list[Endpoint] = []
            for handle, expired, timer_due, retry_due in rows:
                ep = self.endpoint(handle)
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
            self.route_requests.run(uow, now_dt)  # R8.2
            if retry_all:
                self.remote.release_inbound(uow)
            self.remote.flush_events(uow)
            uow.flush()
            self._set_next_deadline(uow.sql("conversation/select_next_deadline.sql", {})[0][0])
        return len(rows)

    def _expire(self, uow: UnitOfWork, ep: Endpoint) -> None:
        """C2: the lifetime passed; this side ends with error -8489 (each side of a local
        conversation carries the same lifetime, so both sides end)."""
        t = transition(ep.role, ep.state, "lifetime_expired")
        self._drop_transmissions(uow, ep)
        ep.state = t.state
        if t.state == "ER":
            ep.error_code = LIFETIME_EXPIRED
            ep.error_description = _LIFETIME_TEXT
            self._stage_local(uow, ep, ERROR, "X", error_body(LIFETIME_EXPIRED, _LIFETIME_TEXT))
        uow.touch(ep)

    def _retry(self, uow: UnitOfWork, endpoints: list[Endpoint], now: datetime) -> None:
        deliverable: list[tuple[Endpoint, _Delivery]] = []
        remote: list[tuple[Endpoint, Remote]] = []
        failing: dict[str, list[str]] = {}
        for ep in endpoints:
            ep.route = None  # DELAYED and failed conversations are routed again
            waiting_status = ep.transmission_status
            ep.transmission_next_attempt = None  # let _target decide afresh
            target = self._target(uow, ep)
            if target is None:
                continue  # bounced: its transmissions were dropped
            if isinstance(target, Remote):
                remote.append((ep, target))
            elif isinstance(target, str):
                ep.transmission_retry_count += 1
                ep.transmission_next_attempt = now + timedelta(
                    seconds=self._backoff(ep.transmission_retry_count))
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
            self.remote.resubmit(uow, remote)
        if not deliverable:
            return
        handles = columns.guids(ep.conversation_handle for ep, _ in deliverable)
        rows = transmission_pieces.with_bodies(uow, uow.sql(
            "conversation/select_transmission_queue_of.sql", {"conversation_handle": handles}))
        uow.sql("conversation/delete_transmission_queue_of.sql", {"conversation_handle": handles})
        transmission_pieces.delete_of(uow, {"conversation_handle": handles})
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
                self._deliver(uow, ep, target, messages)
