"""Sweeps end to end: 24 runs on the local pool and on Ray give identical tables; resume; failures; crashes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from megha.sweep import run_sweep
from megha.sweep.aggregate import collect
from megha.sweep.spec import load_plans

#: 2 schedulers x 3 datacenter sizes x 4 seeds = 24 small runs (the first Google sub-trace jobs).
SWEEP24 = {
    "sweep": {"name": "s24"},
    "base": {"trace": "sample:GOOG_subtrace", "max_jobs": 8, "gms": 2, "lms": 2},
    "grid": {"workers": [40, 80, 160], "seed": [0, 1, 2, 3]},
    "runs": [{"scheduler": "megha", "options": {"heartbeat": 5}}, {"scheduler": "sparrow"}],
}


def _table(out: Path):
    return pq.read_table(out / "results.parquet")


@pytest.fixture(scope="module")
def local24(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweeps") / "local"
    res = run_sweep(SWEEP24, out, workers=2, progress=False, log=lambda s: None)
    assert len(res.ran) == 24 and not res.failed and not res.skipped
    return out


def test_local_pool_sweep(local24: Path) -> None:
    t = _table(local24)
    assert t.num_rows == 24
    rows = t.to_pylist()
    assert {r["status"] for r in rows} == {"ok"}
    assert [r["index"] for r in rows] == list(range(24))
    assert {(r["scheduler"], r["workers"], r["seed"]) for r in rows} == {
        (s, w, k) for s in ("megha", "sparrow") for w in (40, 80, 160) for k in range(4)
    }
    for r in rows:
        assert r["tasks"] > 0 and r["delay_p50"] is not None and r["alloc_p99"] is not None
        assert (local24 / "runs" / r["run_id"] / "summary.json").is_file()
        assert (local24 / "runs" / r["run_id"] / "tasks.parquet").is_file()
    csv_text = (local24 / "results.csv").read_text()
    assert csv_text.count("\n") == 25
    assert (local24 / "report.html").is_file()
    timing = (local24 / "timing.csv").read_text().splitlines()
    assert len(timing) == 25 and ",local," in timing[1]
    # the same seed gives the same result wherever it runs: seeds differ, repeats do not
    by = {(r["scheduler"], r["workers"], r["seed"]): r["delay_mean"] for r in rows}
    assert by[("megha", 40, 0)] != by[("megha", 40, 1)]


def test_ray_gives_identical_table(local24: Path, tmp_path: Path, monkeypatch) -> None:
    # ray is in the test extra (CI installs it); skipped only where megha was installed without it
    ray = pytest.importorskip("ray")
    # A fresh, small local instance fit for a shared 2-core machine: never another developer's cluster
    # (address="local", own session directory), no dashboard, no usage reporting, a small object store (each run
    # returns a few kB of files).
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        ray.shutdown()
    session_dir = tempfile.mkdtemp(prefix="megha-ray-")  # short: Ray's socket paths must stay < 108 characters
    try:
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=100 * 1024**2,
            _temp_dir=session_dir,
        )
        try:
            res = run_sweep(SWEEP24, tmp_path / "ray", address="ray", progress=False, log=lambda s: None)
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(session_dir, ignore_errors=True)
    assert res.engine == "ray" and len(res.ran) == 24 and not res.failed
    assert _table(tmp_path / "ray").equals(_table(local24))
    assert (tmp_path / "ray" / "results.csv").read_text() == (local24 / "results.csv").read_text()
    assert ",ray," in (tmp_path / "ray" / "timing.csv").read_text()


def test_resume_after_interruption_runs_only_the_missing(local24: Path, tmp_path: Path) -> None:
    out = tmp_path / "resume"
    seen: list[str] = []

    def stop_after_5(plan, outcome) -> None:
        seen.append(plan.id)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(SWEEP24, out, workers=2, progress=False, log=lambda s: None, on_result=stop_after_5)
    _, plans = load_plans(out)
    finished = {p.id for p in plans if (out / "runs" / p.id / "summary.json").is_file()}
    assert 5 <= len(finished) < 24
    assert not [d for d in (out / "runs").iterdir() if ".tmp-" in d.name]  # only whole runs on disk
    from megha.errors import InputError

    with pytest.raises(InputError, match="already finished; use --resume"):
        run_sweep(SWEEP24, out, workers=2, progress=False, log=lambda s: None)
    res = run_sweep(SWEEP24, out, workers=2, resume=True, progress=False, log=lambda s: None, report=False)
    assert set(res.skipped) == finished
    assert set(res.ran) == {p.id for p in plans} - finished
    assert _table(out).equals(_table(local24))
    # nothing left to do: a second resume runs nothing
    res = run_sweep(SWEEP24, out, resume=True, progress=False, log=lambda s: None, report=False)
    assert res.ran == [] and len(res.skipped) == 24


def test_failed_run_is_reported_and_does_not_stop_the_others(tmp_path: Path) -> None:
    doc = {
        "base": {"trace": "sample:YH_small", "workers": 30, "gms": 2, "lms": 2},
        "grid": {"seed": [0, 1]},
        "runs": [{"scheduler": "megha"}, {"scheduler": "megha", "trace": str(tmp_path / "missing.tr")}],
    }
    res = run_sweep(doc, tmp_path / "f", workers=2, progress=False, log=lambda s: None)
    assert len(res.failed) == 2 and len(res.ran) == 4
    rows = _table(tmp_path / "f").to_pylist()
    assert [r["status"] for r in rows] == ["ok", "ok", "failed", "failed"]
    assert "no such trace file" in rows[2]["error"]
    err = json.loads((tmp_path / "f" / "runs" / rows[2]["run_id"] / "error.json").read_text())
    assert "InputError" in err["error"] and err["traceback"]
    html = (tmp_path / "f" / "report.html").read_text()
    assert "Failed runs" in html and "no such trace file" in html
    # --resume retries failed runs (they have no summary.json); fix the input and they succeed
    shutil.copyfile(
        Path(__import__("megha.samples", fromlist=["x"]).resolve("sample:YH_small")), tmp_path / "missing.tr.gz"
    )
    doc["runs"][1]["trace"] = str(tmp_path / "missing.tr.gz")
    res = run_sweep(doc, tmp_path / "f", workers=1, resume=True, progress=False, log=lambda s: None, report=False)
    assert len(res.ran) == 2 and not res.failed
    assert [r["status"] for r in collect(tmp_path / "f", load_plans(tmp_path / "f")[1])] == ["ok"] * 4


def test_crashing_worker_process_is_isolated(tmp_path: Path, monkeypatch) -> None:
    import os

    import megha.runner as run_mod

    real = run_mod.simulate

    def crashing(cfg, *a, **k):
        if cfg.seed == 13:
            os._exit(1)  # the worker process dies (as with an out-of-memory kill)
        return real(cfg, *a, **k)

    monkeypatch.setattr(run_mod, "simulate", crashing)  # inherited by the forked pool processes
    doc = {"base": {"trace": "sample:YH_small", "workers": 30, "gms": 2, "lms": 2}, "grid": {"seed": [0, 13, 2, 3]}}
    res = run_sweep(doc, tmp_path / "c", workers=2, progress=False, log=lambda s: None, report=False)
    assert len(res.ran) == 4
    assert list(res.failed.values()) == ["the worker process running this run died (out of memory? a crash?)"]
    statuses = {r["seed"]: r["status"] for r in _table(tmp_path / "c").to_pylist()}
    assert statuses == {0: "ok", 13: "failed", 2: "ok", 3: "ok"}


def test_cli_sweep_and_report(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from megha.cli import app

    f = tmp_path / "s.toml"
    f.write_text(
        '[base]\ntrace = "sample:YH_small"\nworkers = 30\ngms = 2\nlms = 2\n[grid]\nseed = [0, 1]\n'
        'scheduler = ["megha", "sparrow"]\n'
    )
    out = tmp_path / "o"
    r = CliRunner().invoke(app, ["sweep", str(f), "--out", str(out), "--workers", "2", "-q"])
    assert r.exit_code == 0, r.output
    assert _table(out).num_rows == 4 and (out / "sweep.toml").is_file()
    r = CliRunner().invoke(app, ["sweep", str(f), "--out", str(out), "-q"])
    assert r.exit_code == 2 and "--resume" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["sweep", str(f), "--out", str(out), "--resume"])
    assert r.exit_code == 0 and "0 run now, 4 kept" in " ".join(r.output.split())
    (out / "report.html").unlink()
    r = CliRunner().invoke(app, ["sweep", "report", str(out)])
    assert r.exit_code == 0 and (out / "report.html").is_file()
    r = CliRunner().invoke(app, ["sweep", "report", str(tmp_path)])
    assert r.exit_code == 2 and "not a sweep directory" in " ".join(r.output.split())


def test_ray_missing_gives_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    import sys

    from megha.errors import InputError

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(InputError, match=r'pip install "ray>=2.9"'):
        run_sweep(
            {"base": {"trace": "sample:YH_small", "workers": 10}},
            tmp_path / "r",
            address="auto",
            progress=False,
            log=lambda s: None,
        )


def test_ray_client_address_without_grpc_gives_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    import sys

    from megha.errors import InputError

    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc -> ImportError (ray without its client part)
    with pytest.raises(InputError, match=r'Ray Client address, which needs pip install "ray\[client\]>=2.9"'):
        run_sweep(
            {"base": {"trace": "sample:YH_small", "workers": 10}},
            tmp_path / "r",
            address="ray://127.0.0.1:1",
            progress=False,
            log=lambda s: None,
        )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
def test_pool_workers_die_with_a_killed_driver(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    spec = tmp_path / "slow.toml"
    spec.write_text(
        '[sweep]\nname = "slow"\n[base]\nscheduler = "megha"\ntrace = "sample:GOOG_subtrace"\nmax_jobs = 400\n'
        "workers = 5000\n[grid]\nseed = [0, 1, 2, 3, 4, 5, 6, 7]\n"
    )
    driver = subprocess.Popen(
        [sys.executable, "-m", "megha.cli", "sweep", str(spec), "--out", str(tmp_path / "out"), "-j", "2", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None:
        with open(f"/proc/{driver.pid}/task/{driver.pid}/children") as f:
            children = [int(x) for x in f.read().split()]
        if len(children) >= 2 and (tmp_path / "out" / "runs").is_dir():
            break
        time.sleep(0.2)
    assert driver.poll() is None and len(children) >= 2, "the sweep did not start its pool"
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(c) for c in children):
        time.sleep(0.2)
    left = [c for c in children if _alive(c)]
    for c in left:  # do not leave them running if the test fails
        os.kill(c, signal.SIGKILL)
    assert not left, f"pool processes {left} outlived the killed sweep"
