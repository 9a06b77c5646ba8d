"""Engine.categorical: on DuckDB, the few-valued text columns of a relation become ENUMs
so that the decisions' last join carries and the Parquet writer writes small integers.
What must hold: the values, their order and the Parquet written are those of the text;
only columns of 1..CATEGORY_MAX_VALUES distinct values change type. Generated text (the
values come from users' routes, addresses and database names), then a whole resolve of a
generated workload against the same resolve without categories."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.apps.pipeline import engine as engine_module
from pybroker.apps.pipeline.engine import DuckDBEngine
from pybroker.apps.pipeline.generate import run_generate
from pybroker.apps.pipeline.resolve import (
    OPTION_TEXT_COLUMNS,
    load_conversations,
    load_routing_state,
    resolve,
    run_resolve,
)
from pybroker.apps.pipeline.schema import CONVERSATIONS
from pybroker.errors import PipelineError

TEXT = ("origin", "service_name", "broker_instance")
LIMIT = 4
# few values (so some columns fit the limit), with quotes, a backslash, U+0000, an empty
# string, non-ASCII text and NULLs
VALUE = st.one_of(st.none(),
                  st.sampled_from(["", "'", '"x"', "é", "TCP://a:4022", "b", "\x00", "a\\"]),
                  st.text(max_size=5))


def _column_types(duck: DuckDBEngine, relation: str) -> dict[str, str]:
    return {name: kind for name, kind in duck.con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = $t", {"t": relation}).fetchall()}


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.tuples(VALUE, VALUE, VALUE), max_size=30))
def test_categories_keep_values_order_and_the_written_text(values, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module, "CATEGORY_MAX_VALUES", LIMIT)
        _check_categories(values, tmp_path_factory.mktemp("categorical"))


def _check_categories(values, out):
    rows = [(f"id{i:03d}", *v, None) for i, v in enumerate(values)]
    with DuckDBEngine() as duck:
        duck.register_rows("c", CONVERSATIONS, rows)
        name = duck.categorical("c_values", "c", TEXT)
        assert name == "c_values"
        types = _column_types(duck, name)
        for i, column in enumerate(TEXT, start=1):
            distinct = {r[i] for r in rows} - {None}
            # DuckDB 1.5.6 cannot sort by an ENUM with U+0000 in a value: such stays text
            fits = 0 < len(distinct) <= LIMIT and not any("\x00" in v for v in distinct)
            expected = "ENUM" if fits else "VARCHAR"
            assert types[column].split("(")[0] == expected, (column, distinct)
            # an ENUM sorts as its text (ties broken by the id)
            order = f'SELECT conversation_id FROM {{}} ORDER BY "{column}", conversation_id'
            assert duck.con.execute(order.format(name)).fetchall() == \
                duck.con.execute(order.format("c")).fetchall()
        _, kept = duck.fetch(name)
        assert sorted(kept) == sorted(rows)
        duck.write(name, out)
    [part] = sorted(out.glob("*.parquet"))
    table = pq.read_table(part)
    for column in TEXT:
        assert table.schema.field(column).type == pa.string()
    assert sorted(zip(*(table.column(c).to_pylist() for c in table.column_names),
                      strict=True)) == sorted(rows)


def test_a_relation_with_no_few_valued_column_is_kept_as_text(monkeypatch):
    monkeypatch.setattr(engine_module, "CATEGORY_MAX_VALUES", 1)
    rows = [(f"id{i}", f"o{i}", f"s{i}", None, None) for i in range(3)]
    with DuckDBEngine() as duck:
        duck.register_rows("c", CONVERSATIONS, rows)
        duck.categorical("c_values", "c", TEXT)
        assert set(_column_types(duck, "c_values").values()) <= {"VARCHAR", "TIMESTAMP"}
        assert sorted(duck.fetch("c_values")[1]) == rows


def test_resolve_writes_the_same_decisions_with_categories(tmp_path):
    # run_resolve takes categories (the decisions are only written); the same resolve
    # without them, in one engine, must give the same rows and the same Parquet schema
    work = tmp_path / "work"
    with DuckDBEngine() as duck:
        run_generate(duck, work, conversations=3000, routes=40, seed="7")
    with DuckDBEngine() as duck:
        run_resolve(duck, work / "conversations.parquet", work, tmp_path / "with")
        types = _column_types(duck, "resolve_option_values")
        # the generated routes have few outcomes, steps and addresses
        assert all(types[c].startswith("ENUM") for c in ("outcome", "match_step"))
        assert set(types) >= set(OPTION_TEXT_COLUMNS)
    with DuckDBEngine() as duck:
        catalog = load_routing_state(duck, work, "state")
        relation = load_conversations(duck, work / "conversations.parquet")
        duck.write(resolve(duck, relation, catalog, "plain"), tmp_path / "without")
    con = duckdb.connect()
    files = {d: str(tmp_path / d / "*.parquet") for d in ("with", "without")}
    assert con.execute("SELECT COUNT(*) FROM read_parquet($p)",
                       {"p": files["with"]}).fetchone() == (3000,)
    for a, b in (("with", "without"), ("without", "with")):
        assert con.execute(
            "SELECT COUNT(*) FROM (SELECT * FROM read_parquet($a) "
            "EXCEPT ALL SELECT * FROM read_parquet($b))", {"a": files[a], "b": files[b]}
        ).fetchone() == (0,)
    assert pq.read_schema(next((tmp_path / "with").glob("*.parquet"))) == pq.read_schema(
        next((tmp_path / "without").glob("*.parquet")))
    # not everything is the same row: the decisions name routes and outcomes
    assert con.execute("SELECT COUNT(DISTINCT outcome) FROM read_parquet($p)",
                       {"p": files["with"]}).fetchone()[0] > 1


def test_an_unknown_column_is_a_pipeline_error_naming_the_stage():
    with DuckDBEngine() as duck:
        duck.register_rows("c", CONVERSATIONS, [("a", "o", "s", None, None)])
        with pytest.raises(PipelineError, match=r"c_values.*no_such_column"):
            duck.categorical("c_values", "c", ("no_such_column",))
