"""The findings as SQL: diagnose() and sys.dm_broker_findings in every instance file
(sql/catalog/44_diagnose.sql), computed over that instance alone. They agree with
``pybroker.diagnose`` on the rules one instance decides, go once the fix is applied, and the
DuckDB CLI reads them on a snapshot with no Python involved."""

from __future__ import annotations

import datetime as dt
import re

import pytest

import pybroker
from pybroker.apps.diagnose.rules import RULES_BY_CODE
from pybroker.storage.resources import sql_dir
from tests.test_diagnose import _conversations
from tests.test_duckdb_cli import cli

LATER = dt.timedelta(hours=2)
_AT = "SELECT code, database_name, objects FROM diagnose(at_time := ?, leak_count := 3)"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One file with a queue OFF, an msdb route out with forwarding off, three
    fire-and-forget dialogs and two messages that wait (nothing routes them)."""
    file = tmp_path_factory.mktemp("findings") / "app.duckdb"
    _conversations(file, 3, end=True)
    with pybroker.connect(file, worker=False) as inst:
        db = inst.database("App")
        db.execute("ALTER QUEUE InitQueue WITH STATUS = OFF")
        inst.database("msdb").create_route("Out", address="tcp://10.0.0.9:4022")
        db.drop_route("AutoCreatedLocal")
        db.begin_dialog("Target", "Elsewhere").send(b"a")  # Target has a queue that is ON
        db.begin_dialog("Target", "Elsewhere").send(b"b")
    return file


def test_the_rules_in_sql_are_diagnoses_own():
    text = (sql_dir() / "catalog" / "44_diagnose.sql").read_text()
    rows = re.findall(r"\('(D-[A-Z]{3}-\d{3})', '(\w+)', '([^']*)'\)", text)
    assert len(rows) == 12
    for code, severity, title in rows:
        rule = RULES_BY_CODE[code]
        assert (severity, title) == (rule.severity, rule.title), code


def test_the_findings_agree_with_diagnose_and_go_with_the_fix(made, tmp_path):
    file = tmp_path / "app.duckdb"
    file.write_bytes(made.read_bytes())
    later = dt.datetime.now(dt.UTC).replace(tzinfo=None) + LATER
    with pybroker.connect(file, worker=False) as inst:
        now = {row[0] for row in inst.sql(
            "SELECT code FROM sys.dm_broker_findings").fetchall()}
        found = {(c, d, tuple(o)) for c, d, o in inst.sql(_AT, [later]).fetchall()}
    assert now == {"D-CFG-003", "D-CFG-010", "D-CNV-007"}  # young: no pile, nothing waits long
    assert {c for c, _, _ in found} == {"D-CFG-003", "D-CFG-010", "D-CNV-001", "D-CNV-005",
                                        "D-CNV-007", "D-CNV-008", "D-CNV-009"}
    python = {(f.code, f.database, f.objects)
              for f in pybroker.diagnose([file], now=later, leak_count=3)}
    sql_codes = {c for c, _, _ in found}
    assert found == {f for f in python if f[0] in sql_codes}
    with pybroker.connect(file, worker=False) as inst:  # the fixes of two of them
        inst.database("App").execute("ALTER QUEUE InitQueue WITH STATUS = ON")
        inst.database("msdb").drop_route("Out")
        left = {row[0] for row in inst.sql(_AT, [later]).fetchall()}
    assert not {"D-CFG-003", "D-CFG-010"} & left


@pytest.mark.cli
def test_the_duckdb_cli_sees_the_findings_on_a_snapshot(made, tmp_path):
    with pybroker.connect(made, worker=False) as inst:
        snapshot = inst.snapshot(tmp_path / "snapshot.duckdb")
    rows = cli(snapshot, "SELECT 'now' AS at, code, severity, count FROM "
                         "sys.dm_broker_findings UNION ALL SELECT 'later', code, severity, "
                         "count FROM diagnose(at_time := TIMESTAMP '2999-01-01', "
                         "leak_count := 3)")
    assert {"at": "now", "code": "D-CFG-003", "severity": "error", "count": "1"} in rows
    assert {"at": "now", "code": "D-CNV-007", "severity": "warning", "count": "3"} in rows
    assert {"at": "later", "code": "D-CNV-001", "severity": "warning", "count": "3"} in rows
    assert "D-CNV-001" not in {r["code"] for r in rows if r["at"] == "now"}


def test_the_benchs_leak_is_counted_in_sql(tmp_path):
    from pybroker.devtools.bench.diagnose import DATABASE, _build

    inst = _build(tmp_path / "bench.duckdb", 47_499, routes=10, endpoints=1_000)
    try:  # endpoint k: 0-3 CONVERSING initiators, 4-6 DI targets, 7-9 CLOSED initiators
        rows = inst.sql("SELECT code, database_name, count FROM diagnose(leak_count := 1, "
                        "leak_age := 300) WHERE code LIKE 'D-CNV-%'").fetchall()
    finally:
        inst.close()
    assert {database for _, database, _ in rows} == {DATABASE}
    assert sum(count for code, _, count in rows if code == "D-CNV-007") == 300  # no age
    counts = {code: count for code, _, count in rows}
    assert 0 < counts["D-CNV-001"] < 300 and 0 < counts["D-CNV-009"] < 300  # k seconds old
