"""Inputs for the pipeline tests: the seed examples as routing states with a batch of
conversations each, and a small recorded traffic (transmission queue, endpoints)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

import pybroker
from pybroker.apps.pipeline.engine import Engine
from pybroker.apps.pipeline.resolve import check_unique_conversations, run_resolve
from pybroker.apps.pipeline.schema import CONVERSATIONS, DECISIONS, TABLES_BY_NAME, Table
from pybroker.devtools.demos.routing import build_example, load_examples
from pybroker.errors import PipelineError

BEGIN = datetime(2030, 1, 1)
REPEAT = 40  # conversations per seed case: enough for every arbitrary pick to show


def arrow_schema(table: Table) -> pa.Schema:
    to_arrow = {
        "VARCHAR": pa.string(), "INTEGER": pa.int32(), "BIGINT": pa.int64(),
        "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us"), "BLOB": pa.binary(),
        "DOUBLE": pa.float64(),
    }
    return pa.schema([(c.name, to_arrow[c.type]) for c in table.columns])


def write_rows(path: Path, table: Table, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(table)), path)
    return path


def read_rows(path: Path) -> list[tuple]:
    files = sorted(Path(path).glob("*.parquet")) if Path(path).is_dir() else [Path(path)]
    table = pa.concat_tables([pq.read_table(f) for f in files])
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))


def _seed_cases():
    """(name, example, forwarding setting, its cases) per routing state of seed_states."""
    for example in load_examples():
        settings = {example.forwarding} | {
            c.forwarding for c in example.cases if c.forwarding is not None
        }
        for forwarding in sorted(settings):
            cases = [c for c in example.cases
                     if (example.forwarding if c.forwarding is None else c.forwarding)
                     == forwarding]
            yield f"ex{example.number}_fwd{int(forwarding)}", example, forwarding, cases


def seed_state_names() -> list[str]:
    return [name for name, *_ in _seed_cases()]


def seed_states(tmp: Path, names: set[str] | None = None) -> list[SimpleNamespace]:
    """One instance file per (example, forwarding setting its cases use), with a
    conversations file of its cases, each case REPEAT times; ``names``: only those."""
    states = []
    for name, example, forwarding, cases in _seed_cases():
        if names is not None and name not in names:
            continue
        file = tmp / f"{name}.duckdb"
        with pybroker.connect(file) as inst:
            build_example(inst, example)
            inst.forwarding = forwarding
        rows, expect = [], {}
        for i, case in enumerate(cases):
            for j in range(REPEAT):
                cid = f"{name}-{i}-{j}"
                rows.append({"conversation_id": cid, "origin": case.origin,
                             "service_name": case.service,
                             "broker_instance": case.broker_instance,
                             "begin_time": BEGIN})
                expect[cid] = case
        conversations = write_rows(tmp / f"{name}.parquet", CONVERSATIONS, rows)
        states.append(SimpleNamespace(name=name, file=file, conversations=conversations,
                                      expect=expect))
    return states


def resolve_to_rows(engine: Engine, conversations: Path, routing: Path, out: Path) -> list:
    run_resolve(engine, conversations, routing, out)
    return read_rows(out)


def decision(row: tuple) -> SimpleNamespace:
    return SimpleNamespace(**dict(zip(DECISIONS.column_names, row, strict=True)))


AS_OF = datetime(2026, 3, 1, 12, 0, 0)
NO_ROUTE = ("The target service name could not be found. Ensure that the service name is "
            "specified correctly and/or the routing information has been supplied.")


def write_traffic(directory: Path, sales_id: int) -> None:
    """A recorded transmission queue and conversation endpoints beside an export of an
    instance with database Sales (id ``sales_id``): three conversations to
    RemoteService (routed by a network route), two to NowhereService (no route: DELAYED,
    waiting since 10:00 and 11:30), one stuck on a connection error."""
    t0 = AS_OF - timedelta(hours=2)  # 10:00
    def guid(n: int) -> str:
        return f"00000000-0000-4000-8000-{n:012d}"
    queue = []
    for conv in range(3):
        for seq in range(2):
            queue.append({
                "database_id": sales_id, "conversation_handle": guid(conv),
                "to_service_name": "RemoteService", "from_service_name": "SalesService",
                "to_broker_instance": None, "service_contract_name": "OrderContract",
                "message_type_name": "Order", "message_sequence_number": seq,
                "enqueue_time": t0 + timedelta(minutes=30 * conv + seq),
                "is_end_of_dialog": False, "is_conversation_error": False,
                "message_body": b"x" * 10,
                "transmission_status": ("Connection attempt failed with error: '10061(No "
                                        "connection could be made)'." if conv == 2 else ""),
            })
    for conv, start in ((10, t0), (11, t0 + timedelta(minutes=90))):
        queue.append({
            "database_id": sales_id, "conversation_handle": guid(conv),
            "to_service_name": "NowhereService", "from_service_name": "SalesService",
            "to_broker_instance": None, "service_contract_name": "OrderContract",
            "message_type_name": "Order", "message_sequence_number": 0,
            "enqueue_time": start, "is_end_of_dialog": False, "is_conversation_error": False,
            "message_body": None, "transmission_status": NO_ROUTE,
        })
    write_rows(directory / "transmission_queue.parquet",
               TABLES_BY_NAME["transmission_queue"], queue)
    endpoints = [{
        "database_id": sales_id, "conversation_handle": guid(conv),
        "conversation_id": guid(100 + conv), "conversation_group_id": guid(200 + conv),
        "is_initiator": True, "service_name": "SalesService",
        "service_contract_name": "OrderContract",
        "far_service": "NowhereService" if conv >= 10 else "RemoteService",
        "far_broker_instance": None, "lifetime": AS_OF + timedelta(days=1),
        "state": "SO" if conv >= 10 else "CO",
        "send_sequence": 1, "receive_sequence": 0, "receive_sequence_frag": 0,
    } for conv in (0, 1, 2, 10, 11)]
    write_rows(directory / "conversation_endpoints.parquet",
               TABLES_BY_NAME["conversation_endpoints"], endpoints)


def traffic_instance(directory: Path) -> int:
    """An instance exported to ``directory`` (with AS_OF as its export time is not
    recorded: traffic gets --as-of), plus its recorded traffic; returns Sales' id."""
    from pybroker.apps.pipeline.export import export_instance

    file = directory.parent / f"{directory.name}.duckdb"
    with pybroker.connect(file) as inst:
        sales = inst.create_database("Sales")
        sales.create_route("RemoteRoute", service_name="RemoteService",
                           address="tcp://remote.example.com:4022")
        sales_id = sales.database_id
    export_instance(file, directory)
    write_traffic(directory, sales_id)
    return sales_id


# six ids with copies, one without: the refusal names the first five
DUPLICATED_IDS = ["a", "b", "a", "c", "c", "c", "d", "e", "e", "f", "f", "g", "g"]


def expected_refusal(ids: list[str]) -> str | None:
    """The message check_unique_conversations gives, worked out in Python: at most five
    duplicated ids, in order, each with its number of rows; None for no duplicates."""
    copies = sorted((i, n) for i, n in Counter(ids).items() if n > 1)[:5]
    if not copies:
        return None
    shown = ", ".join(f"{i!r} ({n} rows)" for i, n in copies)
    return ("c.parquet: conversation_id must be unique, but some appear more than once: "
            f"{shown}")


def refusal(engine: Engine, ids: list[str]) -> str | None:
    rows = [(i, "Shop", "S", None, datetime(2030, 1, 1)) for i in ids]
    engine.register_rows("conversations", CONVERSATIONS, rows)
    try:
        check_unique_conversations(engine, "conversations", Path("c.parquet"))
    except PipelineError as exc:
        return str(exc)
    return None
