"""``pybroker bench wire`` at tiny sizes: the report's structure, and every case delivered
every message (never an assertion on speed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from pybroker.devtools.bench import wire, wire_child, wire_floors

TINY = {"messages": 200, "conversations": 10, "sends_per_transaction": 50, "paced": 100,
        "rate": 1_000, "large": 3, "large_per_transaction": 2, "raw_frames": 500}


@pytest.fixture(scope="module")
def report():
    return wire.run(repeat=1, sizes=TINY)


def test_every_case_delivered_every_message(report):
    assert report["sizes"] == TINY and report["repeat"] == 1
    for name in ("one_conversation", "many_conversations", "local_one_conversation",
                 "local_many_conversations", "forwarded"):
        assert report[name]["messages"] == report[name]["delivered"] == 200, name
    for name in ("paced", "local_paced", "raw_paced"):
        assert report[name]["messages"] == report[name]["delivered"] == 100, name
    for name in ("large", "local_large", "raw_large"):
        assert report[name]["messages"] == report[name]["delivered"] == 3, name
    assert report["raw_stream"]["messages"] == report["raw_stream"]["delivered"] == 500


def test_the_storage_floor_of_the_streams_takes_every_row_through(tmp_path):
    """(b)'s storage floor: both shapes put every row in and take it out again (a lost or
    doubled row raises), each file left empty."""
    floor = wire_floors.stream_floor(tmp_path, TINY, wire.BODY_BYTES)
    assert floor["wire_per_s"] > 0 and floor["local_per_s"] > 0
    assert floor["wire_cpu_us_per_message"] > 0 and floor["local_cpu_us_per_message"] > 0
    for name in ("sender", "receiver", "local"):
        with duckdb.connect(str(tmp_path / f"stream-floor-{name}.duckdb")) as con:
            assert con.execute("SELECT COUNT(*) FROM bench_queue_floor").fetchone() == (0,)


def test_the_report_has_every_figure_and_verdict(report):
    for name in ("one_conversation", "many_conversations"):
        r = report[name]
        assert {"end_to_end_per_s", "sent_per_s", "acknowledged_per_s", "received_per_s",
                "ratio_local", "ratio_raw", "met"} <= set(r)
        assert r["met"] == (r["end_to_end_per_s"] >= 10_000)
    p = report["paced"]
    assert {"p50_ms", "p99_ms", "sent_per_s", "messages_per_transaction", "ratio_local_p50",
            "ratio_raw_p50", "met"} <= set(p)
    assert p["p50_ms"] <= p["p99_ms"]
    assert p["met"] == (p["p50_ms"] <= 2 and p["p99_ms"] <= 10)
    floor = report["commit_floor"]
    assert 0 < floor["p50_ms"] <= floor["p99_ms"]
    assert p["ratio_floor_p50"] == p["p50_ms"] / floor["p50_ms"]
    assert p["ratio_floor_p99"] == p["p99_ms"] / floor["p99_ms"]
    paced_floor = report["paced_floor"]  # the same commits at (c)'s pace, pipelined
    assert 0 < paced_floor["p50_ms"] <= paced_floor["p99_ms"]
    assert paced_floor["messages_per_transaction"] >= 1
    assert p["ratio_paced_floor_p50"] == p["p50_ms"] / paced_floor["p50_ms"]
    # the same floor with the RECEIVEs on a connection of their own (concurrent
    # transactions): every message through, its own latency and ratio
    apart = report["paced_floor_two_connections"]
    assert 0 < apart["p50_ms"] <= apart["p99_ms"]
    assert apart["messages_per_transaction"] >= 1
    assert p["ratio_paced_floor_two_connections_p50"] == p["p50_ms"] / apart["p50_ms"]
    stream_floor = report["stream_floor"]  # (b)'s rows through bare tables
    assert stream_floor["local_share"] == (stream_floor["wire_per_s"]
                                           / stream_floor["local_per_s"])
    # the CPUs each paced run kept busy: CPU time over wall time, so above 0 and at most
    # the machine's CPUs (with a margin for the clocks' granularity)
    cpus = report["machine"]["cpus"]
    for figures in (p, paced_floor, apart):
        assert 0 < figures["cpus_busy"] <= cpus * 1.1
    assert "cpus_busy" not in report["local_paced"]
    # where the time goes: every step of the way, each measured (the frame leaves during
    # the SEND's commit, so that step may be below 0; the others follow one another)
    assert {f"stage_{name}_p50_ms" for name, _ in wire.STAGES} <= set(p)
    assert all(p[f"stage_{name}_p50_ms"] >= 0 for name, _ in wire.STAGES
               if name != "frame_sent")
    assert not any(key.startswith("stage_") for key in report["local_paced"])
    assert report["large"]["met"] == (report["large"]["mb_per_s"] >= 50)
    assert report["targets"] == {"messages_per_s": 10_000.0, "p50_ms": 2.0, "p99_ms": 10.0,
                                 "mb_per_s": 50.0, "forwarded_ratio": 0.70,
                                 "local_share": 0.70, "floor_p50_ratio": 1.5,
                                 "floor_p99_ratio": 4.0}
    for name in ("one_conversation", "many_conversations"):  # the ratio targets
        r = report[name]
        assert r["local_share"] == pytest.approx(
            r["end_to_end_per_s"] / report[f"local_{name}"]["end_to_end_per_s"])
        assert r["local_share_met"] == (r["local_share"] >= 0.70)
        # the CPUs each process keeps busy, and both would at the target share's rate
        for side in ("sender", "receiver"):
            assert r[f"{side}_cpus_busy"] == pytest.approx(
                r[f"{side}_cpu_us_per_message"] * r["end_to_end_per_s"] / 1e6)
            assert 0 < r[f"{side}_cpus_busy"] <= cpus * 1.1
        local = report[f"local_{name}"]["end_to_end_per_s"]
        assert r["target_per_s"] == pytest.approx(0.70 * local)
        assert r["cpus_at_target"] == pytest.approx(
            (r["sender_cpu_us_per_message"] + r["receiver_cpu_us_per_message"])
            * 0.70 * local / 1e6)
        assert r["cpus_at_target"] > 0
    assert p["floor_met"] == (p["ratio_floor_p50"] <= 1.5 and p["ratio_floor_p99"] <= 4.0)
    assert set(report["load"]) == {"before", "after"}
    text = wire.format_report(report)
    assert "(a) 1 conversation, 200 messages" in text
    assert "(b) 10 conversations, 200 messages" in text
    assert "(d) 3 bodies of 1 MiB" in text
    assert "storage floor (the SEND's, the arrival's and the RECEIVE's durable commits" in text
    assert "(e) (b)'s workload through a forwarder (A -> F -> B, three processes)" in text
    assert "where the time goes, p50 of each step from the SEND: SEND committed " in text
    assert "the same commits at the same pace (1,000/s; the receiver's arrival and " in text
    assert "RECEIVE on two connections (concurrent transactions): p50 " in text
    assert "storage floor of (b)'s rows (bare tables, nothing of pybroker's): the wire's " in text
    assert f"CPUs kept busy at this pace (of {cpus}): the two instance processes " in text
    b = report["many_conversations"]
    assert (f"CPUs kept busy (of {cpus}): sender {b['sender_cpus_busy']:.2f}, receiver "
            f"{b['receiver_cpus_busy']:.2f}; at the target share's rate "
            f"({b['target_per_s']:,.0f}/s) this CPU a message would keep "
            f"{b['cpus_at_target']:.2f} busy") in text


def test_the_forwarded_case_reports_its_ratio_and_the_forwarders_memory(report):
    e = report["forwarded"]
    assert e["ratio_direct"] == (e["end_to_end_per_s"]
                                 / report["many_conversations"]["end_to_end_per_s"])
    assert e["met"] == (e["ratio_direct"] >= 0.70)
    assert e["forwarder_cpu_us_per_message"] > 0
    assert e["forwarding_size_mb"] == 10  # the default, R7.3
    assert e["forwarder_rss_bound_mb"] == 10 + wire.FORWARDER_RSS_ALLOWANCE_MB
    if e["forwarder_peak_rss_mb"] is not None:  # /proc: Linux
        assert 0 < e["forwarder_idle_rss_mb"] <= e["forwarder_peak_rss_mb"]
        assert e["memory_met"] == (e["forwarder_peak_rss_mb"] <= e["forwarder_rss_bound_mb"])


def test_profile_leaves_a_cprofile_file_of_each_child(tmp_path):
    import pstats

    wire.run(repeat=1, sizes={**TINY, "messages": 20, "paced": 10, "large": 1,
                              "raw_frames": 20}, profile_dir=str(tmp_path))
    for role in ("sender", "receiver", "forwarder"):
        stats = pstats.Stats(str(tmp_path / f"{role}.prof"))
        assert any(name == "handle" for _, _, name in stats.stats), role  # Child.handle
        # every thread's share, not only the main thread's: the event loop's frames
        assert any(path.endswith("frames.py") for path, _, _ in stats.stats), role
        alone = pstats.Stats(str(tmp_path / f"{role}-pybroker-endpoint.prof"))
        assert not any(name == "handle" for _, _, name in alone.stats), role


@pytest.mark.cli
def test_the_command_line_rejects_a_bad_retry_scale():
    done = subprocess.run([sys.executable, "-m", "pybroker", "bench", "wire",
                           "--retry-scale", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--retry-scale must be a positive number" in done.stderr


def test_json_of_the_report_round_trips(report):
    again = json.loads(json.dumps(report))
    assert again["one_conversation"]["delivered"] == 200
    assert again["forwarded"]["delivered"] == 200


@pytest.mark.cli
def test_quick_json_has_the_forwarded_case(tmp_path):
    """``--quick --json --repeat 1``: the forwarded case's fields (no timing asserted)."""
    done = subprocess.run([sys.executable, "-m", "pybroker", "bench", "wire", "--quick",
                           "--json", "--repeat", "1"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    e = json.loads(done.stdout)["forwarded"]
    assert e["messages"] == e["delivered"] == 2_000
    assert {"end_to_end_per_s", "ratio_direct", "met", "forwarder_cpu_us_per_message",
            "forwarding_size_mb", "forwarder_idle_rss_mb", "forwarder_peak_rss_mb",
            "forwarder_rss_bound_mb", "memory_met"} <= set(e)


def test_each_sides_cpu_is_split_by_the_thread_that_spent_it(report):
    parts = [*wire_child.THREAD_PARTS.values(), "other"]
    for name in ("one_conversation", "many_conversations", "paced"):
        r = report[name]
        for side in ("sender", "receiver"):
            split = [r[f"{side}_cpu_us_{part}"] for part in parts]
            assert all(us >= 0 for us in split)
            # /proc counts whole clock ticks (10 ms), process_time() nanoseconds: a thread's
            # share may be read up to a tick over (the worker, DuckDB's: a few threads)
            tick_us = 1e6 / os.sysconf("SC_CLK_TCK") / r["messages"]
            assert sum(split) <= r[f"{side}_cpu_us_per_message"] + 8 * tick_us
    assert "sender " in wire.format_report(report) and " (api " in wire.format_report(report)


def test_a_threads_cpu_goes_to_its_part():
    spun, done = threading.Event(), threading.Event()

    def work() -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.3:
            pass
        spun.set()
        done.wait(10)  # still alive (in /proc) when measured

    before = wire_child.thread_cpu_seconds()
    worker = threading.Thread(target=work, name="pybroker-endpoint")
    worker.start()
    try:
        assert spun.wait(10)
        after = wire_child.thread_cpu_seconds()
    finally:
        done.set()
        worker.join()
    assert after["connections"] - before["connections"] >= 0.25
    assert after["api"] - before["api"] < 0.1  # this thread waited meanwhile
