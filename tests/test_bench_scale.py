"""benchmarks/bench_scale.py: the repeated runs' median, the fingerprint check and the targets column."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scale.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_scale", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(name: str, cpu: float, fp: str = "abc", status: str = "ok") -> dict:
    return {
        "scheduler": name,
        "workers": 10_000,
        "status": status,
        "tasks": 1000,
        "cpu_s": cpu,
        "wall_s": cpu,
        "tasks_per_cpu_s": 1000 / cpu,
        "sim_cpu_s": cpu,
        "sim_tasks_per_cpu_s": 1000 / cpu,
        "events_per_task": 2.0,
        "peak_rss_mb": 100.0,
        "delay_p50": 0.0,
        "delay_p99": 0.0,
        "fingerprint": fp,
    }


def test_repeated_runs_report_the_median_cpu_run_and_every_runs_cpu(bench, monkeypatch) -> None:
    runs = iter([_row("flow", 30.0), _row("flow", 20.0), _row("flow", 25.0)])
    monkeypatch.setattr(bench, "run_one", lambda *a: next(runs))
    row = bench.run_repeated("flow", "sample:x", 10_000, Path("."), 60.0, 3)
    assert row["status"] == "ok"
    assert row["cpu_s"] == 25.0
    assert row["cpu_runs"] == [20.0, 25.0, 30.0]


def test_runs_that_disagree_on_the_fingerprint_are_flagged(bench, monkeypatch) -> None:
    runs = iter([_row("flow", 30.0, "aaa"), _row("flow", 20.0, "bbb")])
    monkeypatch.setattr(bench, "run_one", lambda *a: next(runs))
    row = bench.run_repeated("flow", "sample:x", 10_000, Path("."), 60.0, 2)
    assert row["status"] == "fingerprint varies: aaa, bbb"


def test_a_failed_run_is_reported_as_it_failed(bench, monkeypatch) -> None:
    runs = iter([_row("flow", 30.0), {"scheduler": "flow", "workers": 10_000, "status": "timeout (60 s)"}])
    monkeypatch.setattr(bench, "run_one", lambda *a: next(runs))
    row = bench.run_repeated("flow", "sample:x", 10_000, Path("."), 60.0, 2)
    assert row["status"] == "timeout (60 s)"


def test_targets_column_says_whether_each_row_reaches_its_rate(bench) -> None:
    rows = [_row("flow", 0.05), _row("megha", 0.05), _row("oracle", 0.05)]  # 20,000 tasks per CPU-second each
    rows[0]["cpu_runs"] = [0.04, 0.05, 0.06]
    text = bench.table(rows, markdown=True, targets=True)
    lines = text.splitlines()
    assert lines[0].endswith("| target | holds |")
    assert "CPU s range" in lines[0]
    assert lines[2].endswith("| 10,000 | yes |")  # flow: 20k against 10k
    assert lines[3].endswith("| 50,000 | no |")  # megha: 20k against 50k
    assert lines[4].endswith("|  |  |")  # no target for oracle
