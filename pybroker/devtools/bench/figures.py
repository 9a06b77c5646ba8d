"""What every benchmark reports alike: the machine it ran on, the median of its runs, and
latency percentiles."""

from __future__ import annotations

import os
import platform
import statistics
from typing import Any

import duckdb


def machine() -> dict[str, Any]:
    """The machine and versions a report's figures come from."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
    }


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the runs (every run has the same keys)."""
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def percentiles_ms(samples: list[float]) -> dict[str, float]:
    """p50 and p99 of latencies in seconds, in ms."""
    ordered = sorted(samples)
    return {"p50_ms": ordered[len(ordered) // 2] * 1e3,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3}


def machine_load() -> str:
    """The load averages (1, 5, 15 minutes) while a bench ran, as figures to print."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
