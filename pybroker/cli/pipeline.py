"""The ``pybroker pipeline ...`` and ``pybroker export`` commands (wired into pybroker.cli.main)."""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from pybroker.apps.pipeline.engine import DEFAULT_MEMORY_LIMIT, ENGINES, Engine, open_engine
from pybroker.apps.pipeline.progress import Progress
from pybroker.apps.pipeline.schema import DECISIONS
from pybroker.cli.support import INSTANCE_FILE_HELP, read_tsql, require_instance_file
from pybroker.errors import PipelineError

EXAMPLES = """\
engines:
  On DuckDB every job runs under --memory-limit (default 2GB) and spills the rest to a
  temporary directory of its own; Spark's memory is Spark's
  (--conf spark.driver.memory=...).
  To scale out on Spark, set spark.sql.shuffle.partitions to 2-3x the cluster's cores and
  keep input and output on storage every executor reaches: only collecting the distinct
  routing keys and joining conversations to their key's options move rows between machines.

errors:
  A job exits 1 with one line on stderr for a missing file or column, a wrong column type,
  a file that is not an instance, an output directory holding anything but a previous
  output (never emptied then), or a Spark master that does not answer within 5 s.

examples:
  pybroker pipeline generate work/ --conversations 1000000 --routes 10000 --seed 7
  pybroker pipeline resolve work/ work/conversations.parquet work/decisions
  pybroker pipeline resolve broker.duckdb conv.parquet out/ --engine spark --master spark://host:7077
  pybroker pipeline impact broker.duckdb conv.parquet impact/ --script change.sql -d Sales
  pybroker export broker.duckdb state/ && pybroker pipeline traffic state/ traffic/
"""


def add_commands(sub: Any, command: Any, usage_error: type[Exception]) -> None:
    """Add ``pipeline`` (with its jobs) and ``export`` to the top-level subparsers."""
    global _UsageError
    _UsageError = usage_error

    p = command("export", "write an instance file's tables as Parquet (the pipeline's "
                "schema, pybroker/apps/pipeline/schema.py)", cmd_export)
    p.add_argument("file", type=Path, help=f"{INSTANCE_FILE_HELP}; opened read-only")
    p.add_argument("directory", type=Path, help="where <table>.parquet files are written")

    pipeline = sub.add_parser(
        "pipeline", help="bulk jobs on DuckDB or Spark: resolve, impact, traffic, generate",
        description="Bulk routing jobs over Parquet, on DuckDB (default) or Spark, from the "
        "same SQL templates as the live engine. Inputs and outputs are Parquet; a routing "
        "state is an instance file or a directory written by `pybroker export`.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pipeline.set_defaults(handler=None, parser=pipeline)
    jobs = pipeline.add_subparsers(title="jobs", metavar="JOB")

    def job(name: str, help_text: str, handler: Any,
            details: str = "") -> argparse.ArgumentParser:
        description = f"{help_text}. {details}" if details else help_text
        p = jobs.add_parser(name, help=help_text, description=description)
        p.set_defaults(handler=handler)
        p.add_argument("--engine", choices=ENGINES, default="duckdb",
                       help="where the job runs (default: duckdb)")
        p.add_argument("--master", default=None,
                       help="Spark master URL: local[*] (default), local[N], "
                       "spark://host:port, yarn, ...")
        p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting, e.g. spark.sql.shuffle.partitions=200")
        p.add_argument("--memory-limit", default=None, metavar="SIZE",
                       help="DuckDB: the memory it may use before it spills to a temporary "
                       f"directory, e.g. 4GB (default: {DEFAULT_MEMORY_LIMIT})")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        return p

    p = job("resolve", "route decisions for a table of conversations: one row per "
            "conversation (the route_decision() columns), expiry judged at each "
            "conversation's begin_time", cmd_resolve,
            "History replays as it was. A conversation whose origin is not a database, or "
            "that has no begin_time, gets NULL decision columns (and is counted).")
    p.add_argument("routing", type=Path, help="instance file or export directory")
    p.add_argument("conversations", type=Path,
                   help="Parquet file or directory: conversation_id, origin, service_name, "
                   "broker_instance, begin_time")
    p.add_argument("output", type=Path, help="output directory (Parquet part files)")

    p = job("impact", "the conversations whose decision changes between two routing states, "
            "and a summary per service and route", cmd_impact,
            "The other state is another instance file or export (--after), or BEFORE with a "
            "T-SQL script of route DDL applied to a temporary copy (--script, with -d naming "
            "the database). changes/ holds each conversation whose decision changes, before "
            "and after; summary/, per service, route and outcome, how many move, become "
            "DELAYED or dropped, or stop being so.")
    p.add_argument("before", type=Path, help="instance file or export directory")
    p.add_argument("conversations", type=Path, help="Parquet, as for resolve")
    p.add_argument("output", type=Path, help="output directory: changes/ and summary/")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--after", type=Path, help="the other state: instance file or export "
                       "directory")
    group.add_argument("--script", help="T-SQL CREATE/ALTER/DROP ROUTE run on a temporary copy "
                       "of BEFORE (a file, or '-' for stdin)")
    p.add_argument("-d", "--database", help="the database the script runs in (required "
                   "with --script)")

    p = job("traffic", "volumes per service and route over time, DELAYED conversations and "
            "their waits, stuck messages and their transmission_status texts", cmd_traffic,
            "volume/: messages, conversations and bytes per database, service, route and "
            "hour; delayed/: DELAYED conversations and their waits; stuck/: messages not "
            "sent, by transmission_status, with the oldest and the longest wait; endpoints/: "
            "endpoints per service, far service and state. An instance keeps no history of "
            "delivered messages, so traffic sees what waits and the endpoints.")
    p.add_argument("source", type=Path, help="export directory (or instance file)")
    p.add_argument("output", type=Path,
                   help="output directory: volume/, delayed/, stuck/, endpoints/")
    p.add_argument("--as-of", help="UTC time waits are measured to (default: the export's "
                   "time, else the latest enqueue_time)")

    p = job("generate", "a seeded synthetic workload: routing tables and conversations as "
            "Parquet", cmd_generate,
            "It reaches every routing rule: three user databases and msdb; single routes, "
            "load-balanced groups, mirrored pairs, LOCAL routes, expiring routes, forwarding "
            "routes, wildcards; conversations with skewed service popularity, a tenth from "
            "outside, spread over --span-days. The same seed writes the same rows on both "
            "engines.")
    p.add_argument("output", type=Path, help="output directory (a routing state plus "
                   "conversations.parquet)")
    p.add_argument("--conversations", type=int, default=100_000,
                   help="conversations to generate (default 100,000)")
    p.add_argument("--routes", type=int, default=1_000,
                   help="routes to generate (default 1,000)")
    p.add_argument("--seed", default="1", help="seed of the generator: the same seed makes "
                   "the same workload (default 1)")
    p.add_argument("--start", default="2026-01-01T00:00:00",
                   help="UTC start of the conversations' time span")
    p.add_argument("--span-days", type=float, default=7.0,
                   help="days the conversations' begin times spread over (default 7)")


_UsageError: type[Exception] = ValueError


def _engine(args: argparse.Namespace) -> Engine:
    if args.engine != "spark" and (args.master is not None or args.conf):
        raise _UsageError("--master and --conf apply to --engine spark only")
    if args.engine == "spark" and args.memory_limit is not None:
        raise _UsageError("--memory-limit applies to --engine duckdb only (for Spark: "
                          "--conf spark.driver.memory=... / spark.executor.memory=...)")
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _UsageError(f"--conf takes KEY=VALUE, not {item!r}")
        conf[key] = value
    return open_engine(args.engine, master=args.master or "local[*]", conf=conf,
                       progress=Progress(),
                       memory_limit=args.memory_limit or DEFAULT_MEMORY_LIMIT)


def _utc(text: str, option: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise _UsageError(f"{option} takes an ISO time like 2026-01-01T12:00:00, not "
                          f"{text!r}") from exc
    if value.tzinfo is not None:
        from datetime import UTC

        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _emit(args: argparse.Namespace, result: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print("\n".join(lines))


def cmd_export(args: argparse.Namespace) -> int:
    from pybroker.apps.pipeline.export import export_instance

    notes = export_instance(require_instance_file(args.file), args.directory)
    print(f"exported {args.file} to {args.directory}")
    for note in notes:
        print(f"  note: {note}")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from pybroker.apps.pipeline.resolve import run_resolve

    start = time.perf_counter()
    with _engine(args) as engine:
        run_resolve(engine, args.conversations, args.routing, args.output)
        engine.read_parquet("written_decisions", args.output, DECISIONS)
        engine.stage("decision_outcomes", "pipeline/decision_outcomes.sql", small=True,
                     decisions="written_decisions")
        _, rows = engine.fetch("decision_outcomes")
    seconds = time.perf_counter() - start
    total = sum(r[2] for r in rows)
    outcomes: dict[str, int] = {}
    for outcome, _, n in rows:
        outcomes[str(outcome)] = outcomes.get(str(outcome), 0) + n
    result = {"engine": args.engine, "output": str(args.output), "conversations": total,
              "seconds": round(seconds, 3), "outcomes": outcomes,
              "decided_by": {f"{o}/{d}": n for o, d, n in sorted(rows, key=str)}}
    undecided = outcomes.get("None", 0)
    lines = [f"resolved {total:,} conversations on {args.engine} in {seconds:.1f} s -> "
             f"{args.output}",
             "  " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items()))]
    if undecided:
        lines.append(f"  note: {undecided:,} conversations have no decision (origin not a "
                     "database of the instance, or no begin_time)")
    _emit(args, result, lines)
    return 0


def cmd_impact(args: argparse.Namespace) -> int:
    from pybroker.apps.pipeline.impact import run_impact

    script = None
    if args.script is not None:
        if not args.database:
            raise _UsageError("--script needs -d/--database: the database the script runs in")
        if args.script == "-":
            script = read_tsql("-")  # UTF-8 (or UTF-16 with a BOM), non-UTF-8 refused
        else:
            path = Path(args.script)
            if not path.is_file():
                raise PipelineError(f"no route script at {path}")
            try:
                script = path.read_bytes().decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise PipelineError(
                    f"route script {path} is not UTF-8 text: byte offset {exc.start}; save "
                    "it as UTF-8") from None
    with _engine(args) as engine:
        summary = run_impact(engine, args.conversations, args.before, args.output,
                             after=args.after, script=script, database=args.database)
    changed = sum(r["conversations"] for r in summary)
    lines = [f"{changed:,} conversations change their decision -> {args.output}/changes"]
    by_change: dict[str, int] = {}
    for r in summary:
        by_change[r["change"]] = by_change.get(r["change"], 0) + r["conversations"]
    if by_change:
        lines.append("  " + ", ".join(f"{k} {v:,}" for k, v in sorted(by_change.items())))
    for r in summary[:20]:
        lines.append(
            f"  {r['conversations']:>9,}  {r['service_name']}: "
            f"{r['before_outcome']} via {r['before_route']} -> "
            f"{r['after_outcome']} via {r['after_route']} ({r['change']})"
        )
    if len(summary) > 20:
        lines.append(f"  ... {len(summary) - 20} more lines in {args.output}/summary")
    _emit(args, {"changed": changed, "by_change": by_change, "summary": summary}, lines)
    return 0


def cmd_traffic(args: argparse.Namespace) -> int:
    from pybroker.apps.pipeline.traffic import run_traffic

    as_of = _utc(args.as_of, "--as-of") if args.as_of else None
    with _engine(args) as engine:
        result = run_traffic(engine, args.source, args.output, as_of=as_of)
    lines = [f"traffic reports -> {args.output}: "
             + ", ".join(f"{k} ({v:,} rows)" for k, v in result["rows"].items())]
    lines += [f"  note: {n}" for n in result["notes"]]
    _emit(args, result, lines)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from pybroker.apps.pipeline.generate import run_generate

    start = _utc(args.start, "--start")
    with _engine(args) as engine:
        result = run_generate(engine, args.output, conversations=args.conversations,
                              routes=args.routes, seed=args.seed, start=start,
                              span_days=args.span_days)
    _emit(args, result, [
        f"generated {args.conversations:,} conversations and {args.routes:,} routes "
        f"(seed {args.seed}) -> {args.output}",
        f"  next: pybroker pipeline resolve {args.output} "
        f"{args.output / 'conversations.parquet'} {args.output / 'decisions'}",
    ])
    return 0
