"""``pipeline resolve``: route decisions for a table of conversations, in bulk.

The stages (templates of sql/pipeline/, the routing steps of sql/routing/_route_steps.sql):

1. ``route_epochs``: the instants at which routes expire split time into epochs, per
   routing database and service (R1.4);
2. ``decision_keys``: the distinct routing keys of the conversations (origin, service,
   broker identifier, epoch), numbered once; keys of a wildcard class share one decision;
3. ``key_options``: the routing process R1-R4 on the keys: every possible decision, ranked;
4. ``decide_conversations``: one decision per conversation, found by equality joins on the
   key's hash (its text's where two texts share a hash) and epoch, then the key's number
   and the ranks of the arbitrary picks (R2.3, R3, R4.2), taken from md5(conversation_id),
   so DuckDB and Spark give the same rows.

Only the last stage reads each conversation's row; the keys are read from the
conversations once, in one aggregation.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pybroker.apps.pipeline.engine import Engine
from pybroker.apps.pipeline.export import export_instance
from pybroker.apps.pipeline.schema import CONVERSATIONS, ROUTING_TABLES
from pybroker.errors import PipelineError

# The bits of a routing key's hash that the key join compares (decision_keys.sql). Tests
# set fewer, so that keys share hashes and the join compares the texts instead.
KEY_HASH_BITS = 64

# The text columns a decision takes from its option as they are. broker_instance is not
# one: a wildcard class's decision names the conversation's own identifier instead.
OPTION_TEXT_COLUMNS = ("outcome", "route", "address", "mirror_address", "database",
                       "match_step", "choose_step", "locate_step", "decided_by")


@contextmanager
def routing_state_dir(source: Path) -> Iterator[Path]:
    """A directory of exported routing tables: ``source`` itself when it is one (from
    ``pybroker export``), else the instance file ``source`` exported to a temporary one."""
    source = Path(source)
    if source.is_dir():
        yield source
        return
    if not source.exists():
        raise PipelineError(f"no instance file or export directory at {source}")
    with tempfile.TemporaryDirectory(prefix="pybroker-state-") as tmp:
        export_instance(source, Path(tmp))
        yield Path(tmp)


def load_routing_state(engine: Engine, directory: Path, prefix: str) -> dict[str, str]:
    """Register the routing tables of an export directory as ``<prefix>_<table>``; returns
    the catalog relation names the routing templates take."""
    names: dict[str, str] = {}
    for table in ROUTING_TABLES:
        path = Path(directory) / f"{table.name}.parquet"
        if not path.exists():
            raise PipelineError(
                f"{directory} has no {table.name}.parquet: not a directory written by "
                "`pybroker export`"
            )
        relation = f"{prefix}_{table.name}"
        engine.read_parquet(relation, path, table)
        names[table.name] = relation
    return names


def load_conversations(engine: Engine, path: Path, name: str = "conversations") -> str:
    engine.read_parquet(name, Path(path), CONVERSATIONS)
    check_unique_conversations(engine, name, path)
    return name


def check_unique_conversations(engine: Engine, name: str, path: Path) -> None:
    """conversation_id is unique (one decision per conversation): refuse duplicates. The
    rows and the distinct hashes of the ids are counted first (one aggregation); only when
    they differ are the duplicates looked for exactly, and named."""
    engine.stage(f"{name}_id_counts", "pipeline/conversation_id_counts.sql", small=True,
                 conversations=name, engine=engine.name)
    _, [(conversation_rows, distinct_hashes)] = engine.fetch(f"{name}_id_counts")
    if conversation_rows == distinct_hashes:
        return
    engine.stage(f"{name}_duplicates", "pipeline/duplicate_conversations.sql", small=True,
                 conversations=name, engine=engine.name)
    _, rows = engine.fetch(f"{name}_duplicates")
    if rows:
        shown = ", ".join(f"{r[0]!r} ({r[1]} rows)" for r in rows)
        raise PipelineError(
            f"{path}: conversation_id must be unique, but some appear more than once: "
            f"{shown}")


def resolve(
    engine: Engine,
    conversations: str,
    catalog: dict[str, str],
    prefix: str,
    *,
    small: bool = False,
    categorical: bool = False,
) -> str:
    """Stage the decisions of ``conversations`` against the catalog relations; returns the
    name of the decisions relation (columns of schema.DECISIONS). ``small``: the decisions
    are read again (impact), so Spark computes them once. ``categorical``: the decisions
    are only written, so their few-valued text columns may come as categories
    (Engine.categorical; DuckDB's ENUM), which join and write faster and are written as
    the same text."""
    p = prefix
    engine.stage(f"{p}_epochs", "pipeline/route_epochs.sql", small=True,
                 routes=catalog["routes"], databases=catalog["databases"])
    engine.stage(f"{p}_keys", "pipeline/decision_keys.sql", small=True,
                 conversations=conversations, epochs=f"{p}_epochs", engine=engine.name,
                 key_hash_bits=KEY_HASH_BITS, **catalog)
    engine.stage(f"{p}_shared_keys", "pipeline/key_hash_shared.sql", small=True,
                 keys=f"{p}_keys")
    _, [(shared_keys,)] = engine.fetch(f"{p}_shared_keys")
    engine.stage(f"{p}_key_options", "pipeline/key_options.sql", small=True,
                 keys=f"{p}_keys", **catalog)
    option_values = f"{p}_key_options"
    if categorical:
        option_values = engine.categorical(f"{p}_option_values", option_values,
                                           OPTION_TEXT_COLUMNS)
    engine.stage(f"{p}_decisions", "pipeline/decide_conversations.sql", small=small,
                 conversations=conversations, keys=f"{p}_keys",
                 key_options=f"{p}_key_options", option_values=option_values,
                 engine=engine.name, by_hash=not shared_keys, key_hash_bits=KEY_HASH_BITS,
                 broadcast=engine.broadcastable(f"{p}_keys", f"{p}_key_options"))
    return f"{p}_decisions"


def run_resolve(engine: Engine, conversations: Path, routing: Path, output: Path) -> None:
    """The whole job: read, decide, write ``output`` (a directory of Parquet part files)."""
    with routing_state_dir(routing) as state:
        catalog = load_routing_state(engine, state, "state")
        relation = load_conversations(engine, conversations)
        decisions = resolve(engine, relation, catalog, "resolve", categorical=True)
        engine.write(decisions, output)
