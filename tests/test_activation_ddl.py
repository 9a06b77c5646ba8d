"""A queue's ACTIVATION (C3): SQL Server's T-SQL (CREATE/ALTER QUEUE ... WITH ACTIVATION)
and the keyword arguments of create_queue/alter_queue give the same sys.service_queues
rows; the settings are checked where they are given."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.core.tsql import AlterQueue, CreateQueue, parse_batch

SHOWN = ("SELECT name, is_receive_enabled, is_retention_enabled, "
         "is_poison_message_handling_enabled, is_activation_enabled, activation_procedure, "
         "max_readers, execute_as_principal_id FROM sys.service_queues "
         "WHERE database_name = ? ORDER BY name")


def shown(inst: pybroker.Instance, db: pybroker.Database) -> list[tuple]:
    return inst.sql(SHOWN, [db.name]).fetchall()


@pytest.mark.parametrize(("text", "statement"), [
    ("CREATE QUEUE q WITH ACTIVATION (PROCEDURE_NAME = [app.handlers:run], "
     "MAX_QUEUE_READERS = 5, EXECUTE AS SELF)",
     CreateQueue("q", activation_procedure="app.handlers:run", max_queue_readers=5,
                 execute_as="SELF")),
    ("create queue q with status = off, activation (status = off, procedure_name = [m:f], "
     "max_queue_readers = 0, execute as owner) retention = on",
     CreateQueue("q", status=False, retention=True, activation_procedure="m:f",
                 activation_status=False, max_queue_readers=0, execute_as="OWNER")),
    ('CREATE QUEUE q WITH ACTIVATION (MAX_QUEUE_READERS = 1 PROCEDURE_NAME = "m:f")',
     CreateQueue("q", activation_procedure="m:f", max_queue_readers=1)),
    ("ALTER QUEUE q WITH ACTIVATION (STATUS = OFF)", AlterQueue("q", activation_status=False)),
    ("ALTER QUEUE q WITH ACTIVATION (DROP), STATUS = ON",
     AlterQueue("q", status=True, drop_activation=True)),
    ("ALTER QUEUE q WITH ACTIVATION (EXECUTE AS SELF, MAX_QUEUE_READERS = 32767)",
     AlterQueue("q", max_queue_readers=32767, execute_as="SELF")),
])  # fmt: skip
def test_activation_forms_parse_to_the_queue_dataclasses(text, statement):
    assert parse_batch(text) == [statement]


def test_a_queue_without_activation_shows_sql_servers_values(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        db = inst.create_database("A")
        q = db.create_queue("q")
        assert (q.activation_status, q.activation_procedure, q.max_queue_readers,
                q.execute_as) == (False, None, 0, None)
        assert shown(inst, db) == [("q", True, False, True, False, None, 0, None)]


# (T-SQL, the same as keyword arguments of create_queue, then of alter_queue)
CASES = [
    ("CREATE QUEUE q WITH ACTIVATION (PROCEDURE_NAME = [app.handlers:run], "
     "MAX_QUEUE_READERS = 1, EXECUTE AS SELF)",
     {"activation_procedure": "app.handlers:run"},
     ("q", True, False, True, True, "app.handlers:run", 1, 1)),
    ("CREATE QUEUE q WITH STATUS = OFF, ACTIVATION (STATUS = OFF, PROCEDURE_NAME = "
     "[a.b.c:Class.method], MAX_QUEUE_READERS = 7, EXECUTE AS OWNER)",
     {"status": False, "activation_procedure": "a.b.c:Class.method",
      "activation_status": False, "max_queue_readers": 7, "execute_as": "owner"},
     ("q", False, False, True, False, "a.b.c:Class.method", 7, -2)),
]  # fmt: skip


@pytest.mark.parametrize(("tsql", "keywords", "row"), CASES)
def test_tsql_and_keyword_arguments_make_the_same_rows(tmp_path, tsql, keywords, row):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        by_tsql = inst.create_database("T")
        by_tsql.execute(tsql)
        by_keywords = inst.create_database("K")
        by_keywords.create_queue("q", **keywords)
        assert shown(inst, by_tsql) == shown(inst, by_keywords) == [row]
        assert by_tsql.queues() == by_keywords.queues()


def test_alter_queue_activation_by_tsql_and_by_keywords(tmp_path):
    steps = [
        ("ALTER QUEUE q WITH ACTIVATION (PROCEDURE_NAME = [m:f], MAX_QUEUE_READERS = 2)",
         {"activation_procedure": "m:f", "max_queue_readers": 2},
         ("q", True, False, True, True, "m:f", 2, 1)),
        ("ALTER QUEUE q WITH ACTIVATION (STATUS = OFF)", {"activation_status": False},
         ("q", True, False, True, False, "m:f", 2, 1)),
        ("ALTER QUEUE q WITH RETENTION = ON ACTIVATION (EXECUTE AS OWNER, "
         "MAX_QUEUE_READERS = 3)",
         {"retention": True, "execute_as": "OWNER", "max_queue_readers": 3},
         ("q", True, True, True, False, "m:f", 3, -2)),
        ("ALTER QUEUE q WITH STATUS = OFF", {"status": False},
         ("q", False, True, True, False, "m:f", 3, -2)),
        ("ALTER QUEUE q WITH ACTIVATION (DROP)", {"drop_activation": True},
         ("q", False, True, True, False, None, 0, None)),
    ]
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        t = inst.create_database("T")
        k = inst.create_database("K")
        t.create_queue("q")
        k.create_queue("q")
        for tsql, keywords, row in steps:
            t.execute(tsql)
            returned = k.alter_queue("q", **keywords)
            assert shown(inst, t) == shown(inst, k) == [row], tsql
            assert k.queues() == [returned] == t.queues()


def test_activation_settings_survive_reopening_the_file(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        inst.create_database("A").execute(CASES[1][0])
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True) as inst:
        assert shown(inst, inst.database("A")) == [CASES[1][2]]


@pytest.mark.parametrize(("call", "message"), [
    (lambda db: db.create_queue("q", activation_procedure="handler one"),
     "the activation procedure 'handler one' is not of the form 'module.path:function'"),
    (lambda db: db.create_queue("q", activation_procedure="a-b:c"),
     "is not of the form 'module.path:function'"),
    (lambda db: db.create_queue("q", activation_procedure="m:f", max_queue_readers=32768),
     "MAX_QUEUE_READERS must be a whole number from 0 to 32767, not 32768"),
    (lambda db: db.create_queue("q", activation_procedure="m:f", max_queue_readers=True),
     "MAX_QUEUE_READERS must be a whole number from 0 to 32767, not True"),
    (lambda db: db.create_queue("q", activation_procedure="m:f", execute_as=""),
     "EXECUTE AS must be SELF, OWNER or a user's name (1 to 128 characters), not ''"),
    (lambda db: db.create_queue("q", max_queue_readers=2),
     "activation_status, max_queue_readers and execute_as go with activation_procedure"),
    (lambda db: db.create_queue("q", activation_procedure="m:f", activation_status="ON"),
     "activation_status must be True (ON) or False (OFF), not 'ON'"),
    (lambda db: db.create_queue("q") and db.alter_queue("q", activation_status=True),
     "queue 'q' has no activation procedure: give activation_procedure (PROCEDURE_NAME)"),
    (lambda db: db.alter_queue("q", drop_activation=True, max_queue_readers=1),
     "ACTIVATION (DROP) takes no other activation setting"),
    (lambda db: db.execute("CREATE QUEUE q WITH ACTIVATION (PROCEDURE_NAME = [a:b:c], "
                           "MAX_QUEUE_READERS = 1)"),
     "the activation procedure 'a:b:c' is not of the form 'module.path:function'"),
])  # fmt: skip
def test_activation_settings_are_checked_when_given(tmp_path, call, message):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        db = inst.create_database("A")
        with pytest.raises(pybroker.InvalidArgumentError, match=re.escape(message)):
            call(db)


def test_an_unimportable_procedure_is_accepted_by_ddl():
    """Importing is the activating process's business (its PYTHONPATH), not the DDL's."""
    with pybroker.connect() as inst:
        db = inst.create_database("A")
        q = db.create_queue("q", activation_procedure="not_installed_anywhere.mod:handler")
        assert q.activation_procedure == "not_installed_anywhere.mod:handler"


_identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_procedure = st.builds(lambda m, f: f"{'.'.join(m)}:{'.'.join(f)}",
                       st.lists(_identifier, min_size=1, max_size=3),
                       st.lists(_identifier, min_size=1, max_size=2))
_activation = st.fixed_dictionaries({
    "PROCEDURE_NAME": _procedure.map(lambda p: f"[{p}]"),
    "MAX_QUEUE_READERS": st.integers(0, 32767).map(str),
}, optional={
    "STATUS": st.sampled_from(["ON", "OFF", "on", "Off"]),
    "EXECUTE AS": st.sampled_from(["SELF", "OWNER", "self", "Owner"]),
})
_queue = st.fixed_dictionaries({}, optional={
    "STATUS": st.sampled_from(["ON", "OFF"]),
    "RETENTION": st.sampled_from(["ON", "OFF"]),
    "POISON_MESSAGE_HANDLING": st.sampled_from(["ON", "OFF"]),
})


@settings(max_examples=150, deadline=None)
@given(activation=_activation, queue=_queue, data=st.data())
def test_any_order_of_settings_parses_to_what_was_written(activation, queue, data):
    def setting(key: str, value: str) -> str:
        if key == "EXECUTE AS":
            return f"EXECUTE AS {value}"
        if key == "POISON_MESSAGE_HANDLING":
            return f"{key} (STATUS = {value})"
        return f"{key} = {value}"

    inner = data.draw(st.permutations([setting(k, v) for k, v in activation.items()]))
    outer = [setting(k, v) for k, v in queue.items()]
    outer.insert(data.draw(st.integers(0, len(outer))), f"ACTIVATION ({', '.join(inner)})")
    separator = data.draw(st.sampled_from([", ", " ", ",\n  "]))
    (statement,) = parse_batch(f"CREATE QUEUE q WITH {separator.join(outer)}")
    assert statement == CreateQueue(
        "q",
        status=queue.get("STATUS", "ON") == "ON",
        retention=queue.get("RETENTION", "OFF") == "ON",
        poison_message_handling=queue.get("POISON_MESSAGE_HANDLING", "ON") == "ON",
        activation_procedure=activation["PROCEDURE_NAME"][1:-1],
        activation_status=None if "STATUS" not in activation
        else activation["STATUS"].upper() == "ON",
        max_queue_readers=int(activation["MAX_QUEUE_READERS"]),
        execute_as=activation["EXECUTE AS"].upper() if "EXECUTE AS" in activation else None,
    )


@pytest.fixture(scope="module")
def shared():
    """One instance for the property tests (opening one per example costs most of them)."""
    with pybroker.connect(worker=False) as inst:
        yield inst, inst.create_database("T"), inst.create_database("K")


@settings(max_examples=40, deadline=None)
@given(procedure=_procedure, readers=st.integers(0, 32767),
       execute_as=st.sampled_from(["SELF", "OWNER"]), status=st.booleans())
def test_tsql_and_keywords_agree_for_any_settings(shared, procedure, readers, execute_as,
                                                  status):
    inst, t, k = shared
    for db in (t, k):
        if db.queues():
            db.drop_queue("q")
    t.execute(f"CREATE QUEUE q WITH ACTIVATION (STATUS = {'ON' if status else 'OFF'}, "
              f"PROCEDURE_NAME = [{procedure}], MAX_QUEUE_READERS = {readers}, "
              f"EXECUTE AS {execute_as})")
    k.create_queue("q", activation_procedure=procedure, activation_status=status,
                   max_queue_readers=readers, execute_as=execute_as)
    assert shown(inst, t) == shown(inst, k)
    assert shown(inst, t)[0][4:7] == (status, procedure, readers)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=40))
def test_any_procedure_name_is_accepted_or_refused_with_a_broker_error(shared, text):
    _, db, _ = shared
    if db.queues():
        db.drop_queue("q")
    try:
        q = db.create_queue("q", activation_procedure=text)
    except pybroker.InvalidArgumentError as exc:
        assert "module.path:function" in str(exc)
    else:
        module, _, function = text.partition(":")
        python = all(p.isidentifier() for p in [*module.split("."), *function.split(".")])
        stored = re.fullmatch(r"(?:[\w#@]+|\[[^\]]+\])(?:\.(?:[\w#@]+|\[[^\]]+\])){0,2}",
                              text.replace("]]", "x"))  # a stored procedure's name
        assert python or stored, text
        assert q.activation_procedure == text
