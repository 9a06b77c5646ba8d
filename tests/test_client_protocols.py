"""The client's instance, database and conversation (pybroker.api.served.client) are classes of
their own, not subclasses of the embedded ones, and both sides have the shape of
pybroker.api.protocols: every public name of the embedded class is a member of its
Protocol, with the same parameters, and exists on the client's class, where it runs in the
server or refuses with ServerError, never falling into code that expects the file. The
T-SQL runner's table of handlers (pybroker.core.tsql.statement_handlers) covers every DDL
statement the parser returns."""

from __future__ import annotations

import inspect
import typing

import pytest

import pybroker
from pybroker.api import protocols as api_protocols
from pybroker.api.conversation import Conversation
from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.api.served import calls
from pybroker.api.served.client import (
    ClientConversation,
    ClientDatabase,
    ClientInstance,
    add_calls,
    public_names,
)
from pybroker.api.served.protocol import CALL_METHOD, GET_PROPERTY
from pybroker.core.tsql import batch, database_ddl, endpoint_ddl, object_ddl
from pybroker.core.tsql.database_statements import DATABASE_SCRIPT_STATEMENTS
from pybroker.core.tsql.statement_handlers import HANDLERS, SERVER_STATEMENTS, StatementRunner
from pybroker.errors import BrokerError, ServerError
from pybroker.server.server import serve_clients

# (client class, embedded class, Protocol, what each embedded object holds as data)
SIDES = [
    (ClientInstance, Instance, api_protocols.BrokerInstance, set()),
    (ClientDatabase, Database, api_protocols.BrokerDatabase,
     {"database_id", "name", "broker_instance"}),
    (ClientConversation, Conversation, api_protocols.BrokerConversation, {"handle"}),
]
TARGETS = {ClientInstance: calls.INSTANCE, ClientDatabase: calls.DATABASE,
           ClientConversation: calls.CONVERSATION}


def protocol_members(protocol: type) -> set[str]:
    return {name for name in (*vars(protocol), *typing.get_type_hints(protocol))
            if not name.startswith("_")}


def parameters(function: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default)
            for p in inspect.signature(function).parameters.values()]  # type: ignore[arg-type]


@pytest.mark.parametrize(("client", "embedded", "protocol", "data"), SIDES)
def test_the_client_class_is_its_own_yet_has_every_public_name(client, embedded, protocol,
                                                               data):
    assert not issubclass(client, embedded) and not issubclass(embedded, client)
    assert protocol not in client.__mro__ and protocol not in embedded.__mro__
    public = set(public_names(embedded))
    assert protocol_members(protocol) == public | data  # the Protocol names them all
    assert [n for n in sorted(public) if not hasattr(client, n)] == []


@pytest.mark.parametrize(("client", "embedded", "protocol", "data"), SIDES)
def test_the_protocol_has_the_embedded_parameters(client, embedded, protocol, data):
    for name in public_names(embedded):
        ours = inspect.getattr_static(embedded, name)
        theirs = inspect.getattr_static(protocol, name, None)
        if inspect.isfunction(ours):
            assert inspect.isfunction(theirs), name
            if name == "close":  # a client's close() has no time-out to give
                assert parameters(theirs) == parameters(ours)[:1]
            else:
                assert parameters(theirs) == parameters(ours), name
        else:  # a property: read-only in both, or settable in both
            assert isinstance(ours, property), name
            settable = ours.fset is not None
            assert settable == (name in typing.get_type_hints(protocol)), name


def test_a_name_the_whitelist_does_not_name_refuses_clearly() -> None:
    whitelist = {key: w for key, w in calls.CALLS.items()
                 if key not in {(calls.DATABASE, CALL_METHOD, "receive"),
                                (calls.DATABASE, GET_PROPERTY, "mirroring_role")}}

    class Probe:
        def __init__(self) -> None:
            self.sent: list[str] = []

        def _run(self, kind: str, method: str, args: tuple = (), kwargs: dict | None = None):
            self.sent.append(method)

    add_calls(Probe, Database, calls.DATABASE, whitelist)
    probe = Probe()
    assert [n for n in public_names(Database) if not hasattr(Probe, n)] == []
    with pytest.raises(ServerError, match=r"receive is not available to a client .*"
                                          r"whitelist \(pybroker.api.served.calls.CALLS\)"):
        probe.receive("q")
    with pytest.raises(ServerError, match="mirroring_role is not available"):
        _ = probe.mirroring_role
    probe.queues()  # what the whitelist names goes to the server
    with pytest.raises(TypeError):  # with the embedded method's signature
        probe.queues("extra")
    assert probe.sent == ["queues"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "broker.duckdb"
    owner = pybroker.connect(path, worker=False)
    db = owner.create_database("A")
    db.create_queue("q")
    db.create_service("s", "q", ["DEFAULT"])
    server = serve_clients(owner)
    client = pybroker.connect(path)
    try:
        yield client, owner
    finally:
        client.close()
        server.close()
        owner.close()


# what a client's classes run here, not in the server
LOCAL = {"close", "instance", "on_close", "path", "read_only", "transaction"}
THROUGH = {"sql"}  # runs there as another call of the whitelist (sql_rows), rebuilt here


def test_every_public_name_of_a_client_runs_there_or_refuses_clearly(served):
    client, owner = served
    assert type(client) is ClientInstance and not isinstance(client, Instance)
    db = client.database("A")
    conv = db.begin_dialog("s", "s")
    for proxy, embedded in ((client, Instance), (db, Database), (conv, Conversation)):
        target = TARGETS[type(proxy)]
        whitelisted = {name for (t, _, name) in calls.CALLS if t == target}
        for name in sorted(set(public_names(embedded)) - whitelisted - LOCAL - THROUGH):
            with pytest.raises(ServerError, match=f"{name}.* is not available to a client"):
                value = getattr(proxy, name)  # a property refuses when it is read
                value()
    assert db == client.database("A") and hash(db) == hash(client.database("A"))
    assert db != owner.database("A")  # a handle of the other side is another object
    assert repr(db) == repr(owner.database("A"))
    assert conv == db.conversation(conv.handle)
    assert repr(conv) == repr(owner.database("A").conversation(conv.handle))
    assert client.sql("SELECT 1 AS one").fetchall() == owner.sql("SELECT 1 AS one").fetchall()
    with client as same:
        assert same is client
    assert not client.read_only and client.path == owner.path


# -- the T-SQL runner's table of handlers --------------------------------------------------


def test_every_ddl_statement_the_parser_returns_has_a_handler() -> None:
    kinds = set(typing.get_args(batch.Statement))
    assert len(kinds) == 39
    # CREATE/DROP DATABASE and ALTER DATABASE ... SET are the script's own (USE follows
    # them): pybroker.core.tsql.database_statements runs them, not a handler
    scripts = set(DATABASE_SCRIPT_STATEMENTS) & kinds
    assert {k.__name__ for k in scripts} == {"CreateDatabase", "DropDatabase",
                                             "AlterDatabaseSet"}
    assert kinds - scripts == set(HANDLERS) | set(SERVER_STATEMENTS) | {
        database_ddl.AlterDatabasePartner}
    runner = StatementRunner(object(), server=lambda s: None,  # type: ignore[arg-type]
                             database_named=lambda name: None)  # type: ignore[arg-type]
    for kind in kinds - scripts:
        assert runner.handler(kind.__new__(kind)) is not None


def test_a_statement_no_handler_knows_runs_nothing(tmp_path):
    with pybroker.connect(None, worker=False) as inst:
        db = inst.create_database("Shop")
        with pytest.raises(BrokerError, match=r"execute\(\) cannot run 'CREATE TABLE t'"):
            db.run_statements([object_ddl.CreateMessageType("Order", "NONE"),
                               "CREATE TABLE t"])
        assert [t.name for t in db.message_types() if not t.is_system] == []


def test_server_statements_go_to_the_batch_s_server_runner() -> None:
    ran: list[object] = []
    named: list[str] = []

    class Partnered:
        mirroring_role = None

        def set_mirroring(self, role, partner=None):
            ran.append(("set_mirroring", role, partner))

    def database_named(name: str) -> Partnered:
        named.append(name)
        return Partnered()

    runner = StatementRunner(object(), server=ran.append,  # type: ignore[arg-type]
                             database_named=database_named)  # type: ignore[arg-type]
    drop = endpoint_ddl.DropEndpoint("E")
    runner.run(drop)
    runner.run(database_ddl.AlterDatabasePartner("Shop", "PARTNER", "tcp://h:4022"))
    assert ran == [drop, ("set_mirroring", "PRINCIPAL", "tcp://h:4022")]
    assert named == ["Shop"]
