"""The reproduction helpers shared by iot23/megha20, exercised with PigeonC on a tiny run."""

from __future__ import annotations

import json

import numpy as np

from megha.config import RunConfig
from megha.experiments.iot23 import PAPER, public, run_case, write_table
from megha.experiments.megha20 import percentiles
from megha.experiments.registry import ReproContext, get


def test_run_case_keeps_summary_and_arrays(tmp_path):
    ctx = ReproContext(out=tmp_path, quick=True, log=lambda s: None)
    cfg = RunConfig(scheduler="pigeonc", trace="sample:YH_small", cluster="sample:pigeon_D10M100S10000")
    r = run_case(ctx, cfg, "tiny")
    assert r["completed"] and r["delay"]["p50"] is not None
    assert r["_delays"].size == 10 and np.isfinite(r["_alloc"]).all()
    assert r["_util"].min() >= 0 and r["_util"].max() <= 1
    json.dumps(public(r))  # JSON-able without the arrays
    write_table([{"workload": "w", "p50": 0.0015, "util_mean": 0.25}], tmp_path / "t", ["workload", "p50", "util_mean"])
    assert (tmp_path / "t.csv").read_text().startswith("workload,p50,util_mean")
    assert "1.5 ms" in (tmp_path / "t.md").read_text() and "25.0 %" in (tmp_path / "t.md").read_text()


def test_percentiles_include_the_deep_tail():
    p = percentiles(np.arange(1, 10001, dtype=float))
    assert list(p) == ["p50", "mean", "p90", "p99", "p99.9", "p99.99"]
    assert p["mean"] == 5000.5 and p["p99.99"] > p["p99.9"] > p["p99"]
    assert percentiles(np.array([np.nan]))["p50"] is None


def test_reproductions_are_registered():
    for eid in ("iot23-synthetic", "iot23-google", "megha20-sparrow", "megha20-central"):
        assert get(eid).id == eid
    assert PAPER["syn_1000"]["PigeonC_rand"]["p50"] == 1416.88
