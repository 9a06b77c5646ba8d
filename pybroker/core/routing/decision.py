"""What routing decides for one conversation (SPEC R2-R4), and the trace of how."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["deliver", "send", "delay", "drop"]

MATCH_STEPS = ("R2.1", "R2.2", "R2.3", "R2.4", "R2.5", "R2.6", "R2.7")
CHOOSE_STEPS = ("R3.1", "R3.2", "R3.3", "R3.4")

# What each step looks for, in the words of SPEC.md (explain_route.sql says the same in SQL).
STEP_TEXT = {
    "R2.1": "(service and broker identifier match)",
    "R2.2": "(service matches, no broker identifier)",
    "R2.3": "(service matches, one broker identifier picked)",
    "R2.4": "(route request to the dynamic routing service)",
    "R2.5": "(wildcard route)",
    "R2.6": "(implicit LOCAL route: the service exists here)",
    "R2.7": "(no matching route)",
    "R3.1": "(a mirrored route)",
    "R3.2": "(a LOCAL route, the service exists in this instance)",
    "R3.3": "(a network address)",
    "R3.4": "(TRANSPORT: the address from the service name)",
    "R3.5": "(no candidate fits)",
    "R3.6": "(forwarding is off)",
    "R4.1": "(the database with the broker identifier)",
    "R4.2": "(the service's database, own database first)",
}


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of the routing process and what it did ('matched', 'no route', ...)."""

    step: str
    result: str


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """Where a conversation goes.

    outcome: 'deliver' (to ``database`` of this instance), 'send' (to ``address``, and
    ``mirror_address`` for a mirrored pair), 'delay' (DELAYED: routed again after a
    time-out; a result, not an error, R2.7) or 'drop' (a message from outside; its sender
    retries). ``route`` is the chosen route's name (None when none was chosen or for the
    implicit LOCAL route of R2.6). ``decided_by`` is the step that settled the outcome.
    """

    outcome: Outcome
    route: str | None
    address: str | None
    mirror_address: str | None
    database: str | None
    broker_instance: str | None
    match_step: str
    choose_step: str | None
    locate_step: str | None
    decided_by: str
    trace: tuple[TraceStep, ...]

    @property
    def route_request_due(self) -> bool:
        """R2.4: the dynamic routing service should be asked for a route (see R8)."""
        return self.decided_by == "R2.4"


def build_trace(
    *,
    names_broker: bool,
    match_step: str,
    choose_step: str | None,
    locate_step: str | None,
    decided_by: str,
    outcome: str,
) -> tuple[TraceStep, ...]:
    """The steps taken, in order, from the step columns of a decision."""
    steps: list[TraceStep] = []
    for step in MATCH_STEPS:
        if step == match_step:
            if step in ("R2.4", "R2.7"):
                steps.append(TraceStep(step, "delayed" if outcome == "delay" else "dropped"))
                return tuple(steps)
            steps.append(TraceStep(step, "matched"))
            break
        if (step in ("R2.1", "R2.6") and not names_broker) or (step == "R2.3" and names_broker):
            steps.append(TraceStep(step, "not applicable"))
        else:
            steps.append(TraceStep(step, "no route"))
    for step in CHOOSE_STEPS:
        if step == choose_step:
            steps.append(TraceStep(step, "chosen"))
            break
        steps.append(TraceStep(step, "no candidate fits"))
    else:
        steps.append(TraceStep("R3.5", "delayed" if outcome == "delay" else "dropped"))
        return tuple(steps)
    if locate_step:
        steps.append(TraceStep(locate_step, "located"))
    if decided_by == "R3.6":
        steps.append(TraceStep("R3.6", "dropped"))
    return tuple(steps)
