"""Message types, contracts, queues and services (SPEC C2, C3), through the Python API and
through Database.execute()'s dispatch of the object DDL statements (pybroker.core.tsql)."""

from __future__ import annotations

import pytest

import pybroker
import pybroker.core.tsql
import pybroker.core.tsql.batches
import pybroker.core.tsql.conversation_parser
from pybroker.core.tsql import CreateRoute
from pybroker.core.tsql.object_ddl import (
    AlterMessageType,
    AlterQueue,
    AlterService,
    CreateContract,
    CreateMessageType,
    CreateQueue,
    CreateService,
    DropContract,
    DropMessageType,
    DropQueue,
    DropService,
)
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InUseError,
    InvalidArgumentError,
    NotFoundError,
)
from pybroker.kernel.catalog_objects import Contract, MessageType, Queue, Service

PREFIX = "http://schemas.microsoft.com/SQL/ServiceBroker/"


@pytest.fixture
def inst(tmp_path):
    with pybroker.connect(tmp_path / "objects.duckdb", worker=False) as instance:
        yield instance


def test_c2_system_message_types_and_default_contract_exist_in_every_database(inst):
    db = inst.create_database("Shop")
    for database in (inst.database("master"), inst.database("msdb"), db):
        types = {t.name: t for t in database.message_types()}
        assert types["DEFAULT"] == MessageType("DEFAULT", "NONE", True)
        assert types[PREFIX + "EndDialog"].validation == "EMPTY"
        assert types[PREFIX + "Error"].validation == "WELL_FORMED_XML"
        assert types[PREFIX + "DialogTimer"].validation == "EMPTY"
        assert database.contract("DEFAULT") == Contract("DEFAULT", (("DEFAULT", "ANY"),), True)
    rows = inst.sql("SELECT database_name, validation, validation_desc FROM "
                    "sys.service_message_types WHERE name = ? ORDER BY database_name",
                    [PREFIX + "Error"]).fetchall()
    assert rows == [("Shop", "X", "XML"), ("master", "X", "XML"), ("msdb", "X", "XML")]


def test_c2_message_types_create_alter_drop(inst):
    db = inst.create_database("Shop")
    assert db.create_message_type("Order", "well_formed_xml") == MessageType(
        "Order", "WELL_FORMED_XML")
    assert db.alter_message_type("Order", "EMPTY").validation == "EMPTY"
    with pytest.raises(AlreadyExistsError):
        db.create_message_type("Order")
    with pytest.raises(InvalidArgumentError, match="NONE, EMPTY or WELL_FORMED_XML"):
        db.create_message_type("Bad", "XML_SCHEMA")
    with pytest.raises(InUseError, match="system message type"):
        db.drop_message_type("DEFAULT")
    with pytest.raises(InUseError, match="system message type"):
        db.alter_message_type(PREFIX + "Error", "NONE")
    db.create_contract("OrderContract", {"Order": "INITIATOR"})
    with pytest.raises(InUseError, match="used by contract"):
        db.drop_message_type("Order")
    db.drop_contract("OrderContract")
    db.drop_message_type("Order")
    with pytest.raises(NotFoundError):
        db.drop_message_type("Order")


def test_c2_contracts(inst):
    db = inst.create_database("Shop")
    db.create_message_type("Order")
    db.create_message_type("Receipt")
    made = db.create_contract("C", {"Order": "initiator", "Receipt": "TARGET",
                                    "DEFAULT": "ANY"})
    assert made == Contract("C", (("DEFAULT", "ANY"), ("Order", "INITIATOR"),
                                  ("Receipt", "TARGET")))
    usages = inst.sql("SELECT message_type_name, is_sent_by_initiator, is_sent_by_target "
                      "FROM sys.service_contract_message_usages WHERE service_contract_name "
                      "= 'C' ORDER BY 1").fetchall()
    assert usages == [("DEFAULT", True, True), ("Order", True, False), ("Receipt", False, True)]
    with pytest.raises(NotFoundError, match="message type 'Nope'"):
        db.create_contract("D", {"Nope": "ANY"})
    with pytest.raises(InvalidArgumentError, match="SENT BY"):
        db.create_contract("D", {"Order": "BOTH"})
    with pytest.raises(InvalidArgumentError, match="at least one"):
        db.create_contract("D", {})
    with pytest.raises(InvalidArgumentError, match="system message type"):
        db.create_contract("D", {PREFIX + "EndDialog": "ANY"})
    with pytest.raises(AlreadyExistsError):
        db.create_contract("C", {"Order": "ANY"})
    with pytest.raises(InUseError, match="system contract"):
        db.drop_contract("DEFAULT")
    assert [c.name for c in db.contracts() if not c.is_system] == ["C"]


def test_c3_queues_and_services(inst):
    db = inst.create_database("Shop")
    assert db.create_queue("Q", False, retention=True, poison_message_handling=False) == Queue(
        "Q", False, True, False)
    assert db.alter_queue("Q", status=True) == Queue("Q", True, True, False)
    assert db.alter_queue("Q", poison_message_handling=True, retention=False) == Queue("Q", True)
    db.create_message_type("M")
    db.create_contract("C", {"M": "ANY"})
    assert db.create_service("S", queue="Q", contracts=["C", "DEFAULT"]) == Service(
        "S", "Q", ("C", "DEFAULT"))
    assert db.create_service("Initiator", queue="Q") == Service("Initiator", "Q", ())
    with pytest.raises(NotFoundError, match="contract 'Nope'"):
        db.create_service("T", queue="Q", contracts=["Nope"])
    with pytest.raises(InUseError, match="used by service"):
        db.drop_queue("Q")
    with pytest.raises(InUseError, match="used by service"):
        db.drop_contract("C")
    db.create_queue("Q2")
    assert db.alter_service("S", "Q2", drop_contracts=["C"]) == Service("S", "Q2", ("DEFAULT",))
    with pytest.raises(NotFoundError, match="does not accept"):
        db.alter_service("S", drop_contracts=["C"])
    db.drop_contract("C")
    db.drop_service("Initiator")
    db.drop_queue("Q")
    assert [q.name for q in db.queues()] == ["Q2"]
    assert inst.sql("SELECT name, contracts FROM sys.services").fetchall() == [
        ("S", ["DEFAULT"])]
    assert inst.sql("SELECT is_retention_enabled, is_poison_message_handling_enabled "
                    "FROM sys.service_queues").fetchall() == [(False, True)]


def test_ddl_statements_dispatch_to_the_api_in_one_transaction(inst):
    db = inst.create_database("Shop")
    db.run_statements([
        CreateMessageType("Order", "WELL_FORMED_XML"),
        CreateMessageType("Scratch"),
        AlterMessageType("Scratch", "EMPTY"),
        DropMessageType("Scratch"),
        CreateContract("OrderContract", (("Order", "INITIATOR"), ("DEFAULT", "ANY"))),
        CreateQueue("OrderQueue", status=False, retention=False, poison_message_handling=False),
        AlterQueue("OrderQueue", status=True),
        CreateQueue("Spare"),
        CreateService("OrderService", "OrderQueue", ("OrderContract",)),
        AlterService("OrderService", add_contracts=("DEFAULT",)),
        CreateService("Gone", "Spare"),
        DropService("Gone"),
        DropQueue("Spare"),
        CreateRoute("R", address="LOCAL"),
    ])
    assert [t.name for t in db.message_types() if not t.is_system] == ["Order"]
    assert db.contract("OrderContract").messages == (("DEFAULT", "ANY"), ("Order", "INITIATOR"))
    assert db.queues() == [Queue("OrderQueue", True, False, False)]
    assert db.services() == [Service("OrderService", "OrderQueue", ("DEFAULT", "OrderContract"))]
    assert db.route("R").address == "LOCAL"
    with pytest.raises(InUseError):
        db.run_statements([DropContract("OrderContract")])  # OrderService accepts it


def test_a_ddl_batch_is_all_or_nothing(inst):
    db = inst.create_database("Shop")
    with pytest.raises(NotFoundError, match="message type 'Missing'"):
        db.run_statements([
            CreateMessageType("Order"),
            CreateQueue("Q"),
            CreateContract("C", (("Missing", "ANY"),)),
        ])
    assert [t.name for t in db.message_types() if not t.is_system] == []
    assert db.queues() == []
    with pytest.raises(BrokerError, match="cannot run"):
        db.run_statements(["CREATE SOMETHING"])


def test_execute_runs_what_the_parser_returns(inst, monkeypatch):
    db = inst.create_database("Shop")
    seen = []

    def fake_parse(text, *, master=False):
        seen.append((text, master))
        return [pybroker.core.tsql.batches.Batch(
            [CreateQueue("Q"), CreateService("S", "Q", ("DEFAULT",))])]

    monkeypatch.setattr(pybroker.core.tsql.batches, "parse_batches", fake_parse)
    db.execute("CREATE QUEUE Q; CREATE SERVICE S ON QUEUE Q ([DEFAULT]);")
    assert seen == [("CREATE QUEUE Q; CREATE SERVICE S ON QUEUE Q ([DEFAULT]);", False)]
    assert db.services() == [Service("S", "Q", ("DEFAULT",))]
