"""The rules of ``pybroker diagnose`` as data: each finding's stable code, its severity,
what happens because of it and what to do (pybroker/docs/diagnose.md explains each).

``happens`` and ``fix`` are texts with ``{name}`` fields that the check fills in from the
objects it found (a fix is T-SQL or a command for a person to read and run; diagnose runs
nothing of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of finding: ``code`` (D-CFG-001), ``severity``, a short ``title``, what
    ``happens`` because of it and what to do (``fix``)."""

    code: str
    severity: Severity
    title: str
    happens: str
    fix: str


RULES: tuple[Rule, ...] = (
    # -- configuration (ssbdiagnose CONFIGURATION's checks, across the instances named) --
    Rule("D-CFG-001", "error", "a route to an instance named that has no such service",
         "conversations that {database} begins with {service} are sent to {address}, "
         "whose instance has no such service: they wait in {database}'s "
         "sys.transmission_queue and are never received",
         "create the service where the route points (CREATE SERVICE [{service}] ON QUEUE "
         "... in a database of that instance), or point the route at the instance that "
         "hosts it: ALTER ROUTE [{route}] WITH ADDRESS = 'tcp://HOST:PORT'"),
    Rule("D-CFG-002", "error", "no route back for replies (R6)",
         "the target {service} in {database} cannot route its replies to {far_service} "
         "(broker {broker_instance}): acknowledgements and replies stay DELAYED in the "
         "target's sys.transmission_queue, and the initiator resends every message (C5)",
         "in {database} of {instance}: CREATE ROUTE [{far_service}_back] WITH SERVICE_NAME "
         "= '{far_service}', BROKER_INSTANCE = '{broker_instance}', ADDRESS = '{address}'"),
    Rule("D-CFG-003", "error", "a queue is OFF",
         "RECEIVE from {queue} fails and messages for its services ({services}) wait in "
         "their senders' transmission queues; a queue is turned OFF by ALTER QUEUE ... "
         "STATUS = OFF or by poison message handling after five rollbacks in a row (C3)",
         "in {database}: ALTER QUEUE [{queue}] WITH STATUS = ON (first remove the message "
         "that rolls back, if poison message handling turned it off)"),
    Rule("D-CFG-004", "error", "activation names a callable whose module cannot be found",
         "when messages arrive on {queue}, activation cannot start {procedure}: module "
         "{module} is not found on this Python's path, so nobody reads the queue (checked "
         "with importlib's finders, without importing the module; the function itself is "
         "not looked up)",
         "install the module where the instance is served, or in {database}: ALTER QUEUE "
         "[{queue}] WITH ACTIVATION (PROCEDURE_NAME = [module.path:function])"),
    Rule("D-CFG-005", "warning", "the broker endpoint is not started",
         "{instance} neither sends nor receives messages between instances while its "
         "endpoint {endpoint} is {state}",
         "on master of {instance}: ALTER ENDPOINT [{endpoint}] STATE = STARTED, then "
         "pybroker serve FILE"),
    Rule("D-CFG-006", "warning", "a route to an address no instance named listens on",
         "messages routed by {route} go to {address}, which is none of the instances "
         "named; if nothing listens there they wait in the transmission queue",
         "name the instance at {address} to diagnose it too, or correct the address: "
         "ALTER ROUTE [{route}] WITH {clause} = 'tcp://HOST:PORT'"),
    Rule("D-CFG-007", "error", "a peer certificate has expired",
         "{instance} refuses connections from {peer} (certificate {certificate}, expired "
         "{expiry}): messages between them wait in the transmission queues",
         "renew it where it is the endpoint's own (its endpoint stopped; "
         "Instance.renew_certificate() in Python): pybroker cert {owner} --renew > "
         "{certificate}.pem; then trust the new one on {instance}: pybroker trust {instance} "
         "{certificate} {certificate}.pem"),
    Rule("D-CFG-008", "warning", "a peer certificate expires within 30 days",
         "{instance} will refuse connections from {peer} after {expiry} (certificate "
         "{certificate})",
         "before {expiry}, renew it where it is the endpoint's own (its endpoint stopped; "
         "Instance.renew_certificate() in Python): pybroker cert {owner} --renew > "
         "{certificate}.pem; then trust the new one on {instance}: pybroker trust {instance} "
         "{certificate} {certificate}.pem"),
    Rule("D-CFG-009", "error", "a peer is not trusted by the other side",
         "{untrusting} does not trust {untrusted}'s endpoint certificate, and one of them "
         "routes to the other: the connection is refused at the handshake and messages "
         "wait in the transmission queue",
         "on {untrusting}: Instance.trust('{untrusted}', PEM) with the PEM of "
         "{untrusted}'s Instance.certificate"),
    Rule("D-CFG-010", "error", "forwarding is needed but off (R3.6, R7.3)",
         "msdb of {instance} routes {service} to {address}, but forwarding is off: a "
         "message from outside that takes this route is dropped and its sender retries "
         "forever",
         "pybroker forwarding FILE on (or on master: ALTER ENDPOINT ... FOR SERVICE_BROKER "
         "(MESSAGE_FORWARDING = ENABLED)), or DROP ROUTE [{route}] in msdb"),
    Rule("D-CFG-011", "error", "a contract the target service does not accept",
         "{endpoints} dialog(s) that {database} began from {service} with {far_service} on "
         "contract {contract} reach {far_service} in {target_database} of {target}, which "
         "accepts {accepted}: the target answers with error -8408 and the dialogs end in "
         "ERROR, their messages never received",
         "in {target_database} of {target}: ALTER SERVICE [{far_service}] (ADD CONTRACT "
         "[{contract}]); or begin the dialogs on a contract it accepts (BEGIN DIALOG ... ON "
         "CONTRACT ...)"),
    # -- routing (no peer has these) -------------------------------------------------------
    Rule("D-CFG-012", "error", "activation names a stored procedure that does not exist",
         "when messages arrive on {queue}, activation cannot start {procedure}: no such "
         "procedure is in {database} (activation looks it up in the queue's own database, "
         "schema dbo when none is named), so nobody reads the queue and each try is a "
         "broker event",
         "in {database}: CREATE PROCEDURE {procedure} AS ..., or ALTER QUEUE [{queue}] WITH "
         "ACTIVATION (PROCEDURE_NAME = an existing procedure)"),
    Rule("D-RTE-001", "error", "a forwarding loop among the instances named (R7)",
         "a message for {service} goes round {cycle} until its hops or its time to live "
         "run out (R7.1): it is dropped and never delivered",
         "in msdb of one of {instances}: ALTER ROUTE or DROP ROUTE the route that points "
         "back ({route}), so that one forwarder delivers {service} or sends it on out of "
         "the loop"),
    Rule("D-RTE-002", "warning", "a route that can never be chosen",
         "{route} in {database} is never chosen for {service}: {winner} wins at {step} "
         "before it ({reason})",
         "in {database}: DROP ROUTE [{route}], or change it or {winner} so that each says "
         "what it is for"),
    Rule("D-RTE-003", "warning", "dynamic routing catches services a wildcard would reach "
         "(R8.3)",
         "{database} has a route to SQL/ServiceBroker/BrokerConfiguration, so R2.4 asks the "
         "configuration service about {services} before its wildcard routes ({wildcards}) "
         "are tried: those conversations are DELAYED until a route request is answered",
         "in {database}: give each service its own route (CREATE ROUTE ... WITH "
         "SERVICE_NAME = '...', ADDRESS = ...), or drop the route to the configuration "
         "service"),
    # -- routes whose far end fails them (route_targets.py) ---------------------------------
    Rule("D-RTE-004", "warning", "a route expires before the conversations it routes",
         "{route} in {database} routes {service} until {expiry} (LIFETIME), but {endpoints} "
         "conversation endpoint(s) there that it routes live longer (the latest until "
         "{latest}): once it expires (R1.4) their messages are {after}",
         "in {database}: {remedy} (or BEGIN DIALOG ... WITH LIFETIME shorter than the "
         "route's)"),
    Rule("D-RTE-005", "warning", "a partner of a mirror route does not claim the database",
         "{route} in {database} sends {service} to the mirrored pair {address} / "
         "{mirror_address}, but {partner} ({partner_address}) has no database with "
         "{service}{broker}: asked which is principal it answers neither (R9.2), so "
         "after a failover to it nothing is sent (R9.4)",
         "on {partner}: create the mirror database with the principal's broker identifier "
         "(create_database(NAME, broker_instance='...')), CREATE SERVICE [{service}] in it and "
         "ALTER DATABASE ... SET PARTNER = '{other_address}'; or correct the route: ALTER "
         "ROUTE [{route}] WITH MIRROR_ADDRESS = 'tcp://HOST:PORT'"),
    Rule("D-RTE-006", "error", "no partner of a mirror route claims to be principal (R9.4)",
         "{route} in {database} sends {service} to the mirrored pair {address} / "
         "{mirror_address}, and neither partner answers PRINCIPAL ({answers}): nothing is "
         "sent to either, and messages wait in the transmission queue while both are asked "
         "again (R9.4)",
         "on the partner that should serve: ALTER DATABASE ... SET PARTNER FAILOVER (or "
         "Database.set_mirroring('PRINCIPAL', partner)), or point the route at the "
         "database's instance: ALTER ROUTE [{route}] WITH ADDRESS = 'tcp://HOST:PORT'"),
    Rule("D-RTE-007", "error", "a TRANSPORT route whose service names do not resolve "
         "(R10.6)",
         "{database} routes {service} by the TRANSPORT route {route}, but {reason}: its "
         "conversations stay DELAYED in the transmission queue",
         "name the service tcp://HOST:PORT/name with the address of the instance that hosts "
         "it (R10.6), or in {database}: CREATE ROUTE ... WITH SERVICE_NAME = '{service}', "
         "ADDRESS = 'tcp://HOST:PORT'"),
    Rule("D-RTE-008", "error", "a forwarder has no route on for a service sent to it (R7, "
         "R3.5)",
         "{senders} send(s) {service} to {instance}, which forwards, but its msdb chooses no "
         "route for {service} and it hosts no such service: each message that arrives there "
         "is dropped (R3.5, remote origin) and its sender retries forever, the messages "
         "waiting in the senders' transmission queues",
         "in msdb of {instance}: CREATE ROUTE [{service}_onwards] WITH SERVICE_NAME = "
         "'{service}', ADDRESS = '{address}' (the instance that hosts it); or point the "
         "senders' routes at that instance"),
    # -- conversation hygiene --------------------------------------------------------------
    Rule("D-CNV-001", "warning", "DISCONNECTED_INBOUND endpoints pile up",
         "{older} of {endpoints} conversation endpoints in {database} are "
         "DISCONNECTED_INBOUND and older than {age}: the far side ended them and this side "
         "never did, so each stays in sys.conversation_endpoints for good (the "
         "fire-and-forget leak); by state: {states}",
         "END CONVERSATION on each when its EndDialog message is received (in {database}: "
         "RECEIVE ... then END CONVERSATION @handle), and end the ones left"),
    Rule("D-CNV-002", "warning", "old CONVERSING endpoints pile up",
         "{older} of {endpoints} conversation endpoints in {database} have been CONVERSING "
         "for longer than {age}: dialogs that no one ends hold their endpoints, and the "
         "memory and rows they take, until their lifetime runs out; by state: {states}",
         "end each dialog once its work is done (END CONVERSATION @handle on both sides), "
         "or BEGIN DIALOG ... WITH LIFETIME = seconds"),
    Rule("D-CNV-003", "warning", "conversation endpoints grow between two readings",
         "sys.conversation_endpoints of {database} grew from {before} to {after} (+{growth}) "
         "in {interval} since the reading {since}; by state: {states}. Endpoints that keep "
         "growing are conversations never ended (D-CNV-001, D-CNV-002), until memory runs "
         "out",
         "find the state that grows (SELECT state_desc, count(*) FROM "
         "sys.conversation_endpoints GROUP BY ALL) and END CONVERSATION on both sides once "
         "a dialog's work is done; then remove the CLOSED ones, which pybroker keeps (END "
         "CONVERSATION @handle WITH CLEANUP, D-CNV-009)"),
    Rule("D-CNV-004", "warning", "the transmission queue grows between two readings",
         "sys.transmission_queue of {database} grew from {before} to {after} (+{growth}) "
         "messages in {interval} since the reading {since}: they are sent faster than they "
         "are acknowledged; by status: {statuses}",
         "read the statuses (SELECT transmission_status, count(*) FROM "
         "sys.transmission_queue GROUP BY ALL) and fix what they name; D-CNV-005 groups "
         "the ones that waited long"),
    Rule("D-CNV-005", "warning", "messages wait in the transmission queue for long",
         "{count} message(s) of {database} have waited in sys.transmission_queue longer than "
         "{age} (the oldest since {oldest}) with the status: {status}",
         "act on the status: a route (CREATE ROUTE), an endpoint that listens (pybroker "
         "serve), a trusted certificate, a queue turned ON; then the sender's next retry "
         "takes them (C5)"),
    Rule("D-CNV-006", "warning", "conversation endpoints with no traffic for long",
         "{endpoints} conversation endpoint(s) of {database} in {state} have had no traffic "
         "known for longer than {age} (the oldest since {oldest}): a dialog nobody uses "
         "holds its endpoint until its lifetime runs out",
         "end the dialogs no longer used (END CONVERSATION @handle), begin them WITH "
         "LIFETIME, or BEGIN CONVERSATION TIMER on the ones that wait by design"),
    Rule("D-CNV-007", "warning", "initiators end before their targets (fire and forget)",
         "{endpoints} dialog(s) from {far_service} to {service} in {database} were ended by "
         "the initiator first (the target is DISCONNECTED_INBOUND{closed}; the oldest "
         "begun {oldest}): an error the target sends back is lost, and unless the target "
         "ends its side the endpoint stays for good",
         "let the target end the dialog: {service} ends it (END CONVERSATION @handle) when "
         "its work is done, and {far_service} ends its side when the EndDialog message "
         "arrives; for the ones left, END CONVERSATION @handle in {database}"),
    Rule("D-CNV-008", "warning", "a target service never ends its dialogs",
         "{older} of {endpoints} target endpoint(s) of {service} in {database} are older "
         "than {age} and not ended ({disconnected} of them DISCONNECTED_INBOUND, the "
         "initiator gone): the service does not END CONVERSATION, and its endpoints pile up "
         "in sys.conversation_endpoints",
         "make {service}'s program END CONVERSATION @handle once it has answered (and on "
         "each EndDialog or Error message it receives), and end the ones left"),
    Rule("D-CNV-009", "info", "CLOSED endpoints kept long",
         "{older} CLOSED conversation endpoint(s) of {database} are older than {age}: "
         "pybroker keeps CLOSED endpoints in sys.conversation_endpoints (where SQL Server "
         "removes them), so they take rows and space until removed",
         "remove them: END CONVERSATION @handle WITH CLEANUP on each (in {database}: SELECT "
         "conversation_handle FROM sys.conversation_endpoints WHERE state_desc = 'CLOSED')"),
)

RULES_BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}
