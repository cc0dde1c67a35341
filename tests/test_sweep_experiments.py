"""megha20-size and megha20-gm-lm run as sweeps (tiny settings here; the real sizes are in the experiments)."""

from __future__ import annotations

import json
from pathlib import Path

from megha.experiments.registry import ReproContext, get, run_experiment


def test_registered() -> None:
    assert "Fig. 8" in get("megha20-size").figures
    assert "Fig. 9" in get("megha20-gm-lm").figures


def test_size_sweep_tiny(tmp_path: Path) -> None:
    ctx = ReproContext(
        out=tmp_path / "size", quick=True, log=lambda s: None, extra={"sizes": [400, 1600], "max_jobs": 4, "workers": 2}
    )
    doc = run_experiment("megha20-size", ctx)
    assert [r["workers"] for r in doc["rows"]] == [400, 1600]
    assert all(r["completed"] for r in doc["rows"]) and not doc["failed"]
    assert doc["mode"] == "resource" and "Google sub-trace" in doc["workload_note"]
    for name in (
        "fig8_allocation.csv",
        "fig8_allocation_vs_size.png",
        "sweep/report.html",
        "sweep/results.parquet",
        "summary.json",
    ):
        assert (tmp_path / "size" / name).is_file(), name
    # the per-GM processing cost grows with the state: the larger datacenter allocates no faster
    assert doc["rows"][1]["alloc_p50"] >= doc["rows"][0]["alloc_p50"]
    # run again: the sweep resumes, nothing is simulated twice
    again = run_experiment("megha20-size", ctx)
    assert again["rows"] == json.loads(json.dumps(doc["rows"]))


def test_gm_lm_sweep_tiny(tmp_path: Path) -> None:
    ctx = ReproContext(
        out=tmp_path / "gl",
        quick=True,
        log=lambda s: None,
        extra={"size": 800, "gms": [1, 4], "lms": [2], "max_jobs": 4, "workers": 2, "mode": "slot"},
    )
    doc = run_experiment("megha20-gm-lm", ctx)
    assert [r["config"] for r in doc["rows"]] == ["1 GM x 2 LM", "4 GM x 2 LM"]
    assert doc["mode"] == "slot" and doc["workers"] == 800
    assert (tmp_path / "gl" / "fig9_allocation_by_config.png").is_file()
    assert set(doc["checks"]) == {
        "more_lms_lower_or_equal_p50",
        "more_gms_lower_or_equal_p50_while_gms_le_lms",
        "gms_beyond_lms_lower_or_equal_p50",
    }
