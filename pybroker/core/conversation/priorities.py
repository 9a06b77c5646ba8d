"""Which broker priority a conversation endpoint takes (CREATE BROKER PRIORITY), as SQL
Server matches them when the endpoint is made: a priority names a contract, a local service
and a remote service, each of which may be ANY (None); of the priorities whose names all
match, the most specific wins, the contract counting before the local service and the local
service before the remote one. No match: the default level, 5. Pure: the caller hands in the
database's priorities."""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_PRIORITY = 5
# (contract, local service, remote service, level); None stands for ANY
PriorityRule = tuple[str | None, str | None, str | None, int]


def _same_name(wanted: str | None, name: str) -> bool | None:
    """True: named and equal (without regard to case, as object names compare); None:
    ANY; False: named and different."""
    if wanted is None:
        return None
    return wanted.casefold() == name.casefold()


def endpoint_priority(rules: Iterable[PriorityRule], contract: str, local_service: str,
                      remote_service: str) -> int:
    """The priority level of an endpoint of ``contract`` whose own service is
    ``local_service`` and whose far service is ``remote_service``. The remote service's
    name is a string the far side chose and is compared exactly, as service names on the
    wire are; contract and local service are objects of the database and compare without
    regard to case."""
    best: tuple[bool, bool, bool] | None = None
    level = DEFAULT_PRIORITY
    for rule_contract, rule_local, rule_remote, rule_level in rules:
        by_contract = _same_name(rule_contract, contract)
        by_local = _same_name(rule_local, local_service)
        by_remote = None if rule_remote is None else rule_remote == remote_service
        if False in (by_contract, by_local, by_remote):
            continue
        rank = (by_contract is True, by_local is True, by_remote is True)
        if best is None or rank > best:
            best, level = rank, rule_level
    return level
