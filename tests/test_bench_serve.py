"""``pybroker bench serve --quick --repeat 1 --json``: the report's shape, every message of
every case came back, and the verdicts follow the figures (never an assertion on speed).
The bench starts and stops its own server and client processes, by pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pybroker.devtools.bench import serve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report():
    done = subprocess.run(
        [sys.executable, "-m", "pybroker", "bench", "serve", "--quick", "--repeat", "1",
         "--json"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_case_moved_every_message(report):
    sizes = report["sizes"]
    assert sizes == serve.QUICK and report["repeat"] == 1
    per_client = sizes["messages"]
    assert report["embedded"]["messages"] == sizes["clients"] * per_client
    assert report["one_client"]["messages"] == per_client
    assert report["clients"]["messages"] == sizes["clients"] * per_client
    # (e): the same clients while /metrics is scraped; the first scrape is at once
    scraped = report["clients_scraped"]
    assert scraped["messages"] == sizes["clients"] * per_client and scraped["scrapes"] >= 1
    assert scraped["ratio_unscraped"] == pytest.approx(
        scraped["per_s"] / report["clients"]["per_s"])
    assert scraped["met"] == (scraped["ratio_unscraped"] >= 0.95)
    assert [(c["workers"], c["handled"]) for c in report["workers"]] == [
        (1, 16), (4, 16), (8, 16)]
    # the writers' shape: a SEND of a reply inside each transaction
    assert [(c["workers"], c["handled"], c["reply"]) for c in report["workers_writing"]
            ] == [(1, 16, True), (4, 16, True), (8, 16, True)]
    for name in ("embedded", "one_client", "clients"):
        r = report[name]
        assert r["per_s"] > 0 and r["seconds"] > 0, name
        assert r["per_s"] == pytest.approx(r["messages"] / r["seconds"]), name


def test_the_ratios_and_verdicts_follow_the_figures(report):
    base = report["embedded"]["per_s"]
    for name in ("one_client", "clients"):
        assert report[name]["ratio_embedded"] == pytest.approx(report[name]["per_s"] / base)
    c, q, idle = report["clients"], report["query"], report["idle"]
    assert c["met"] == (c["ratio_embedded"] >= 0.5)
    assert c["met_c7"] == (c["ratio_embedded"] >= 0.75)
    assert q["queries"] >= 1 and 0 < q["p50_ms"] <= q["p99_ms"]
    assert q["met"] == (q["p50_ms"] <= 10 and q["p99_ms"] <= 50)
    assert q["rows_max"] == 0  # local delivery: nothing waits to be sent on
    assert idle["connections"] == 200
    # a thread per connection, all there at once (the server may start one of its own)
    assert 200 <= idle["threads_added"] <= 202
    assert idle["rss_after_mb"] > 0 and idle["rss_before_mb"] > 0
    assert idle["kb_per_connection"] == pytest.approx(
        (idle["rss_after_mb"] - idle["rss_before_mb"]) * 1024 / 200)
    assert idle["met"] == (idle["kb_per_connection"] <= 64)
    assert report["targets"] == {"ratio_clients_embedded": 0.5,
                                 "ratio_clients_embedded_c7": 0.75, "ratio_scraped": 0.95,
                                 "query_p50_ms": 10.0, "query_p99_ms": 50.0,
                                 "idle_kb_per_connection": 64.0}
    assert set(report["load"]) == {"before", "after"}


def test_the_text_report_names_each_case_and_its_comparison(report):
    text = serve.format_report(report)
    assert "(a) SEND + RECEIVE: embedded (one process, no server" in text
    assert "8 clients at once" in text and "of embedded (target >= 50%" in text
    assert "C7's >= 75%: " in text
    assert "(b) " in text and "reads of sys.transmission_queue through a client" in text
    assert "(c) 200 idle client connections: server RSS" in text
    assert "(e) the 8 clients again while /metrics is scraped every 1 s (" in text
    assert "workers (C7): each RECEIVE of one message, 20 ms of processing" in text
    assert "a client connection each, on the served file" in text
