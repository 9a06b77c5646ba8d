"""``pybroker.diagnose``: read every instance named and report what would make its
messages fail (the rules of pybroker/apps/diagnose/rules.py, pybroker/docs/diagnose.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pybroker.apps.diagnose import (
    configuration,
    contracts,
    forwarders,
    growth,
    hygiene,
    route_targets,
    routing,
)
from pybroker.apps.diagnose.findings import Finding, ordered
from pybroker.apps.diagnose.network import Network, read_node
from pybroker.apps.diagnose.targets import Target, TargetError, open_target
from pybroker.errors import InvalidArgumentError

DEFAULT_LEAK_AGE = dt.timedelta(hours=1)
DEFAULT_LEAK_COUNT = 100
DEFAULT_IDLE_AGE = dt.timedelta(days=1)


def naive_utc(now: dt.datetime | None) -> dt.datetime:
    """``now`` (default the clock's) as the catalog keeps timestamps: UTC, without a zone."""
    if now is None:
        now = dt.datetime.now(dt.UTC)
    return now.astimezone(dt.UTC).replace(tzinfo=None) if now.tzinfo is not None else now


def diagnose(
    targets: Iterable[Any],
    *,
    tokens: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
    leak_age: dt.timedelta = DEFAULT_LEAK_AGE,
    leak_count: int = DEFAULT_LEAK_COUNT,
    since: Iterable[str | Path] = (),
    idle_age: dt.timedelta = DEFAULT_IDLE_AGE,
) -> list[Finding]:
    """The findings over the instances ``targets`` name, errors first.

    Each target is the path of an instance file or of a snapshot (opened read-only, never
    migrated; a file another process serves is read through its server), a
    ``pybroker://HOST:PORT`` address (its token in ``tokens``, keyed by the address), or an
    open Instance (read as it is, left open). ``now`` (UTC; default the clock's) is when
    certificates and endpoint ages are judged; an endpoint older than ``leak_age`` in a
    state that piles up counts towards a leak, reported once ``leak_count`` of them are in
    one state of one database; an endpoint with no traffic known for longer than
    ``idle_age`` is idle (D-CNV-006). ``since`` names earlier readings (snapshots, or instance
    files no process holds) of some of the targets: each is paired with the target whose
    msdb has its msdb's broker identifier, taken when its file was last written, and growth
    by ``leak_count`` or more is reported (D-CNV-003, D-CNV-004). A target or an earlier
    reading that cannot be read (or belongs to no target) raises TargetError (a BrokerError)
    saying which and why."""
    wanted = list(targets)
    if not wanted:
        raise InvalidArgumentError("diagnose needs at least one instance to read")
    if isinstance(leak_count, bool) or not isinstance(leak_count, int) or leak_count < 1:
        raise InvalidArgumentError(f"leak_count must be a whole number of at least 1, not "
                                   f"{leak_count!r}")
    if not isinstance(leak_age, dt.timedelta) or leak_age <= dt.timedelta(0):
        raise InvalidArgumentError(f"leak_age must be a positive timedelta, not {leak_age!r}")
    if not isinstance(idle_age, dt.timedelta) or idle_age <= dt.timedelta(0):
        raise InvalidArgumentError(f"idle_age must be a positive timedelta, not {idle_age!r}")
    now = naive_utc(now)
    opened: list[Target] = []
    try:
        for where in wanted:
            opened.append(open_target(where, tokens))
        named = len(opened)
        for where in since:  # earlier readings: closed with the targets
            opened.append(open_target(Path(where)))
        net = checked_network(opened[:named], now, leak_age, leak_count, opened[named:],
                              idle_age=idle_age)
        return ordered(net.findings)
    finally:
        for target in opened:
            target.close()


def checked_network(opened: list[Target], now: dt.datetime, leak_age: dt.timedelta,
                    leak_count: int, earlier: Iterable[Target] = (), *,
                    idle_age: dt.timedelta = DEFAULT_IDLE_AGE) -> Network:
    """The network of the targets opened, read and checked against every rule: its
    ``findings`` (each once) are what diagnose reports, its nodes what topology draws.
    ``earlier``: readings of some of them to measure growth from (diagnose's ``since``)."""
    names = [t.name for t in opened]
    for index, target in enumerate(opened):  # the same file twice: tell them apart
        if names.count(target.name) > 1:
            target.name = f"{target.name}#{index + 1}"
    net = Network([read_node(t) for t in opened], now, leak_age, leak_count, idle_age)
    for reading in earlier:
        _pair(net, reading)
    configuration.check(net)
    contracts.check(net)
    routing.check(net)
    route_targets.check(net)
    forwarders.check(net)
    hygiene.check(net)
    growth.check(net)
    net.findings = list(dict.fromkeys(net.findings))
    return net


def _msdb(target: Target) -> str | None:
    return next((r["broker_instance"] for r in target.rows("select_databases")
                 if r["name"] == "msdb"), None)


def _pair(net: Network, reading: Target) -> None:
    """Pair an earlier reading with the target it was taken of (by msdb's identifier)."""
    msdb = _msdb(reading)
    node = next((n for n in net.nodes if n.databases.get("msdb") == msdb), None)
    if node is None:
        raise TargetError(f"{reading.name} is a reading of none of the targets named (its "
                          "msdb's broker identifier is none of theirs): name the instance "
                          "it was taken of")
    if node.name in net.earlier:
        raise TargetError(f"{reading.name} and {net.earlier[node.name][0].name} are both "
                          f"earlier readings of {node.name}: give one")
    taken = dt.datetime.fromtimestamp(Path(reading.name).stat().st_mtime, dt.UTC)
    net.earlier[node.name] = (reading, taken.replace(tzinfo=None))
