"""``pybroker.diagnose``: read every instance named and report what would make its
messages fail (the rules of pybroker/apps/diagnose/rules.py, pybroker/docs/diagnose.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from pybroker.apps.diagnose import configuration, hygiene, routing
from pybroker.apps.diagnose.findings import Finding, ordered
from pybroker.apps.diagnose.network import Network, read_node
from pybroker.apps.diagnose.targets import Target, open_target
from pybroker.errors import InvalidArgumentError

DEFAULT_LEAK_AGE = dt.timedelta(hours=1)
DEFAULT_LEAK_COUNT = 100


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
) -> list[Finding]:
    """The findings over the instances ``targets`` name, errors first.

    Each target is the path of an instance file or of a snapshot (opened read-only, never
    migrated; a file another process serves is read through its server), a
    ``pybroker://HOST:PORT`` address (its token in ``tokens``, keyed by the address), or an
    open Instance (read as it is, left open). ``now`` (UTC; default the clock's) is when
    certificates and endpoint ages are judged; an endpoint older than ``leak_age`` in a
    state that piles up counts towards a leak, reported once ``leak_count`` of them are in
    one state of one database. A target that cannot be read raises TargetError (a
    BrokerError) saying which and why."""
    wanted = list(targets)
    if not wanted:
        raise InvalidArgumentError("diagnose needs at least one instance to read")
    if isinstance(leak_count, bool) or not isinstance(leak_count, int) or leak_count < 1:
        raise InvalidArgumentError(f"leak_count must be a whole number of at least 1, not "
                                   f"{leak_count!r}")
    if not isinstance(leak_age, dt.timedelta) or leak_age <= dt.timedelta(0):
        raise InvalidArgumentError(f"leak_age must be a positive timedelta, not {leak_age!r}")
    now = naive_utc(now)
    opened: list[Target] = []
    try:
        for where in wanted:
            opened.append(open_target(where, tokens))
        net = checked_network(opened, now, leak_age, leak_count)
        return ordered(net.findings)
    finally:
        for target in opened:
            target.close()


def checked_network(opened: list[Target], now: dt.datetime, leak_age: dt.timedelta,
                    leak_count: int) -> Network:
    """The network of the targets opened, read and checked against every rule: its
    ``findings`` (each once) are what diagnose reports, its nodes what topology draws."""
    names = [t.name for t in opened]
    for index, target in enumerate(opened):  # the same file twice: tell them apart
        if names.count(target.name) > 1:
            target.name = f"{target.name}#{index + 1}"
    net = Network([read_node(t) for t in opened], now, leak_age, leak_count)
    configuration.check(net)
    routing.check(net)
    hygiene.check(net)
    net.findings = list(dict.fromkeys(net.findings))
    return net
