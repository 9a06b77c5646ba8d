"""A database's part in a mirrored pair (SPEC R9), as ``Database.set_mirroring()`` and
``ALTER DATABASE name SET PARTNER`` on master set it: a service composed on the kernel,
whose methods take the database they act on.

There is no database mirroring to copy: pybroker moves no data between the partners. What
it keeps is the role (PRINCIPAL or MIRROR) and the partner's address, which is what a sender
needs: a mirrored route's probes ask each partner whether it is principal (R9.2), and a
MIRROR database refuses messages, so its senders turn to its partner (R9.3). The two
databases share one broker identifier, as SQL Server's partners do: create the mirror with
``create_database(name, broker_instance=<the principal's>)``.

Failover: there is no mirroring session to swap the roles on both sides at once, so
``fail_over()`` (SET PARTNER FAILOVER) flips the role of the side it runs on. The operator
runs it on both partners (the new principal first); a sender follows whichever partner says
it is principal, so the new principal's claim is what counts (R9.3).

What carries over on failover: only what the new principal's own file holds. Conversations
begun after the failover, and any whose target endpoint the new principal already has (it
was principal for them before), continue there. A conversation the new principal has never
seen ends with an error at its initiator: the principal refuses a later message (sequence
above 0) of a conversation it has no endpoint for, with a notice that is not fatal
(UNKNOWN_AT_PRINCIPAL, kernel/messaging/arrivals.py), takes and acknowledges nothing of it, and
the initiator (kernel/messaging/remote.py) ends the conversation if the far side had
acknowledged one of its messages or sent one: its target endpoint existed, at the former
principal. The initiator gets an Error message (-8462, the description naming the new
principal and the failover), the endpoint goes to ERROR, its transmission queue rows go,
and a "Broker:Conversation" event says so. Its earlier messages stay in the old principal's
file (SQL Server would have them in the mirror's copy of the database).

Why the sender decides, and why the notice is not fatal: the principal cannot tell a
conversation begun at its former partner from one begun after the failover whose second
message overtook its first (a reordered network, or a first message lost and sent again);
only the sender knows whether the far side ever had it. A conversation with nothing
acknowledged and nothing received keeps its messages in flight: the retry brings sequence 0,
which begins the target, and the rest follow in order (P4.4). A first message in the same
batch begins the target before the refusal could happen. The frames are unchanged. What
remains: a refusal about a conversation begun after the failover could, on a network that
reorders the way back, reach the sender after the acknowledgement of its first message,
and end it; TCP keeps one connection's frames in order and the principal sends the
refusal before it can acknowledge the first message, so only a reordering proxy can.

A database that is not in a pair: a later message of an unknown
conversation begins a target endpoint and waits, held, for the earlier ones (P4.4). The
other way round (the initiator's database failed over), a target's message for an initiator
side the new principal does not have is refused with error -8462, which ends that
conversation at the target. Messages the old principal had committed but not acknowledged
when it stopped go to the new one: a first message begins the conversation there (it is
then in both files), a later one ends it as above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.core.routing.cache import NOTHING
from pybroker.core.routing.definition import address_problem, parse_network_address
from pybroker.errors import InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.kernel import DatabaseRef, Kernel

ROLES = ("PRINCIPAL", "MIRROR")


class Mirroring:
    """The mirroring role and partner of the instance's databases."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._store = kernel.store

    def mirroring_role(self, database: DatabaseRef) -> str | None:
        """'PRINCIPAL', 'MIRROR', or None when the database is not part of a mirrored pair."""
        rows = self._store.run("instance/select_mirroring.sql",
                               {"database_id": database.database_id})
        return rows[0][0] if rows else None

    def mirroring_partner(self, database: DatabaseRef) -> str | None:
        """The partner's address (tcp://host:port), or None when not mirrored."""
        rows = self._store.run("instance/select_mirroring.sql",
                               {"database_id": database.database_id})
        return rows[0][1] if rows else None

    def set_mirroring(self, database: DatabaseRef, role: str | None,
                      partner: str | None = None) -> None:
        """The work of ``Database.set_mirroring`` (its docstring says what it does)."""
        if role is None:
            self._write_mirroring(database, None, None)
            return
        if not isinstance(role, str) or role.upper() not in ROLES:
            raise InvalidArgumentError(
                f"a mirroring role is 'PRINCIPAL' or 'MIRROR', not {role!r}")
        if partner is None:
            partner = self.mirroring_partner(database)
            if partner is None:
                raise InvalidArgumentError(
                    f"database {database.name!r} has no partner yet: name it, e.g. "
                    "set_mirroring('PRINCIPAL', partner='tcp://host:4022')")
        if not isinstance(partner, str) or parse_network_address(partner) is None:
            problem = address_problem(partner) if isinstance(partner, str) else "not text"
            raise InvalidArgumentError(
                f"a mirroring partner is a tcp://host:port address, not {partner!r}: {problem}")
        self._write_mirroring(database, role.upper(), partner)

    def fail_over(self, database: DatabaseRef) -> str:
        """The work of ``Database.fail_over`` (its docstring says what it does)."""
        role = self.mirroring_role(database)
        if role is None:
            raise NotFoundError(
                f"database {database.name!r} is not part of a mirrored pair: set a partner first "
                "(set_mirroring, or ALTER DATABASE ... SET PARTNER = 'tcp://host:port')")
        new = "MIRROR" if role == "PRINCIPAL" else "PRINCIPAL"
        self._write_mirroring(database, new, self.mirroring_partner(database))
        return new

    def _write_mirroring(self, database: DatabaseRef, role: str | None,
                         partner: str | None) -> None:
        with self.kernel.write(NOTHING):  # routing reads no role: nothing to decide again
            self._store.run("instance/delete_mirroring.sql", {"database_id": database.database_id})
            if role is not None:
                self._store.run("instance/insert_mirroring.sql", {
                    "database_id": database.database_id, "mirroring_role": role,
                    "mirroring_partner_name": partner, "now": self.kernel.now()})
