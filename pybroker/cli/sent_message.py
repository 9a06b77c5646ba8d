"""What became of a message ``pybroker send`` sent: delivered, refused (its conversation
ended with the broker's error, C2: a target that does not accept the contract, -8408, ...),
or still waiting in the sending database's transmission queue, and why (C4: no route, the
target's queue off, no broker endpoint to send it from).

It is read from the sys.* views (sql/shell/select_sent_message.sql), so a served file is
watched through its server the same way. ``outcome`` decides from one reading; ``watch``
reads again until the outcome is known or the time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pybroker.api.instance import Instance
from pybroker.cli.support import PROG, did_you_mean
from pybroker.core.conversation.model import (
    STATUS_NO_ROUTE,
    STATUS_NO_TRANSPORT,
    STATUS_QUEUE_DISABLED,
)
from pybroker.core.conversation.system_messages import CONTRACT_NOT_SUPPORTED
from pybroker.storage.templates import render

Kind = Literal["delivered", "refused", "waiting", "on its way"]

# Between two readings of a message still on its way (a served file's wire).
FIRST_PAUSE, LONGEST_PAUSE = 0.01, 0.25


@dataclass(frozen=True, slots=True)
class Reading:
    """One reading of the sent message and its conversation's sending side."""

    state: str  # C1: SO, CO, ER, ...
    error_code: int | None
    error_description: str | None
    far_service: str
    far_broker_instance: str | None
    contract: str
    is_waiting: bool  # still in the transmission queue
    transmission_status: str | None  # C4: '' while nothing went wrong


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Kind
    text: str  # what the command tells its user: one line, with what to do


def read(inst: Instance, database: str, handle: str, sequence: int) -> Reading | None:
    """None if the conversation is gone (ended WITH CLEANUP meanwhile)."""
    rows = inst.sql(render("shell/select_sent_message.sql"),
                    {"database": database, "handle": handle, "sequence": sequence}).fetchall()
    if not rows:
        return None
    (state, _, code, description, far_service, far_broker, contract, waiting,
     status) = rows[0]
    return Reading(state, code, description, far_service, far_broker, contract,
                   bool(waiting), status)


def outcome(reading: Reading | None, database: str, *,
            known_services: Callable[[], list[str]],
            address: Callable[[Reading], str | None]) -> Outcome:
    """What one reading says. ``known_services`` and ``address`` (where routing sends the
    conversation now) are asked only when a waiting message's reason needs them."""
    if reading is None:
        return Outcome("refused", "the conversation is gone (ended with cleanup)")
    if reading.state == "ER" and reading.error_code is not None and reading.error_code < 0:
        return Outcome("refused", _refusal(reading))
    if reading.state == "ER":  # the far side's application ended it, after delivery
        return Outcome("delivered", f"the far side then ended the conversation with error "
                       f"{reading.error_code}: {reading.error_description}")
    if not reading.is_waiting:
        return Outcome("delivered", "")
    status = reading.transmission_status or ""
    far = reading.far_service
    if status == STATUS_NO_ROUTE:
        return Outcome("waiting", f"no route to service {far!r}"
                       f"{did_you_mean(far, known_services())}: the message waits in "
                       f"{database}'s transmission queue (DELAYED) and is routed again "
                       "after a time-out; create the service or a route to it "
                       f"(`{PROG} create-route`)")
    if status == STATUS_QUEUE_DISABLED:
        return Outcome("waiting", f"the queue of service {far!r} is disabled (STATUS = "
                       f"OFF): the message waits in {database}'s transmission queue until "
                       "it is on")
    if status == STATUS_NO_TRANSPORT:
        where = address(reading)
        return Outcome("waiting", f"service {far!r} is at {where or 'another instance'}, and "
                       "no broker endpoint runs where the file is open: the message waits in "
                       f"{database}'s transmission queue and leaves when `{PROG} serve "
                       "FILE` runs")
    if status:
        return Outcome("waiting", f"the message to {far!r} waits in {database}'s "
                       f"transmission queue: {status}")
    return Outcome("on its way", f"the message to {far!r} was sent to "
                   f"{address(reading) or 'its route'} and is not acknowledged yet")


def _refusal(reading: Reading) -> str:
    text = f"the message was refused: error {reading.error_code}: {reading.error_description}"
    if reading.error_code == CONTRACT_NOT_SUPPORTED:
        text += (f" Make the target accept it: ALTER SERVICE [{reading.far_service}] (ADD "
                 f"CONTRACT [{reading.contract}]) in its database, or create the service "
                 f"with `{PROG} create-service ... --contract {reading.contract}`.")
    return text


def watch(inst: Instance, database: str, handle: str, sequence: int, *, timeout: float,
          until_delivered: bool, clock: Callable[[], float] = time.monotonic,
          pause: Callable[[float], Any] = time.sleep) -> Outcome:
    """Read until the message is delivered or refused; a message that waits for a reason
    ends the watch at once unless ``until_delivered`` (the reason lasts at least until the
    next retry, C5). Gives the last outcome when ``timeout`` seconds are up."""
    deadline = clock() + timeout
    wait = FIRST_PAUSE

    def known_services() -> list[str]:
        return [name for (name,) in inst.sql(render("shell/select_service_names.sql"))
                .fetchall()]

    def address(reading: Reading) -> str | None:
        return inst.route(reading.far_service, origin=database,
                          broker_instance=reading.far_broker_instance).address

    while True:
        result = outcome(read(inst, database, handle, sequence), database,
                         known_services=known_services, address=address)
        if result.kind in ("delivered", "refused"):
            return result
        if result.kind == "waiting" and not until_delivered:
            return result
        left = deadline - clock()
        if left <= 0:
            return result
        pause(min(wait, left))
        wait = min(wait * 2, LONGEST_PAUSE)
