"""The unit of work of a sweep: simulate one run plan and write its output directory.

This module is imported in pool processes and on Ray workers, so it stays small and imports the simulator
lazily. A run's directory appears atomically: everything is written into ``<id>.tmp-<pid>`` and renamed, so a
``summary.json`` in ``runs/<id>/`` always means a finished run (what ``--resume`` looks for).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

SUMMARY = "summary.json"
ERROR = "error.json"


def is_complete(run_dir: Path) -> bool:
    """A run directory holds a finished run (its summary.json exists)."""
    return (run_dir / SUMMARY).is_file()


def warm_up(schedulers: set[str] | frozenset[str] = frozenset()) -> None:
    """Import what runs need (schedulers, simulator, Parquet writer) and load the compiled kernels once, before
    the worker processes fork, so that each run starts at once. Best effort: a failure here only costs time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet

    pa.array(np.zeros(1))  # pyarrow imports its pandas shim on first conversion (~0.6 s)
    import megha.metrics.report
    import megha.runner  # noqa: F401
    from megha.schedulers import registry

    registry.names()
    try:  # numba first-fit kernel of the wait queues (about 1 s to load from the cache)
        from megha.model.matching import WaitQueue

        q = WaitQueue()
        q.push_back((0,), 0)
        q.pop_first_fitting(0)
    except Exception:
        pass
    if "flow" in schedulers:
        try:
            from megha.schedulers.flow.solvers import warm_up as flow_warm_up

            flow_warm_up()
        except Exception:
            pass


def _noop() -> int:
    return os.getpid()


def die_with_parent(parent: int) -> None:
    """Pool-process initializer: end this process when the sweep's driver dies, even by ``kill -9`` (Linux
    ``PR_SET_PDEATHSIG``; elsewhere a no-op). Without it, orphaned workers would finish their queued runs."""
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux/glibc
        return
    if os.getppid() != parent:  # the driver died before the signal was armed
        os._exit(1)


def execute(plan: dict[str, Any], runs_dir: str | None, plots: bool = False, csv: bool = False) -> dict[str, Any]:
    """Run one plan (``RunPlan.to_json()``); never raises for a failing simulation.

    With ``runs_dir`` the outputs are written to ``runs_dir/<id>/``; without it (a Ray worker that may not
    share the driver's file system) they are returned as ``files: {name: bytes}`` for the driver to write.
    Returns ``{id, status: ok|unfinished|failed, seconds, run_seconds, run_cpu_seconds, error?, traceback?, files?}``.
    """
    t0 = time.perf_counter()
    rid = plan["id"]
    out: dict[str, Any] = {"id": rid, "pid": os.getpid(), "host": os.uname().nodename}
    tmp: Path | None = None
    try:
        from megha.config import RunConfig
        from megha.metrics.report import write_run
        from megha.runner import simulate

        cfg = RunConfig(**plan["config"])
        res = simulate(cfg)
        if runs_dir is not None:
            final = Path(runs_dir) / rid
            tmp = final.with_name(f"{rid}.tmp-{os.getpid()}")
            if tmp.exists():
                shutil.rmtree(tmp)
        else:
            tmp = Path(tempfile.mkdtemp(prefix=f"megha-{rid[-10:]}-"))
        doc = write_run(res, tmp, csv=csv, plots=plots)
        out["run_seconds"] = float(doc["wall_seconds"])
        out["run_cpu_seconds"] = float(doc.get("cpu_seconds") or 0.0)
        out["run_cpu_seconds"] = float(doc.get("cpu_seconds") or 0.0)
        out["status"] = "ok" if doc["completed"] else "unfinished"
        if runs_dir is not None:
            install(tmp, Path(runs_dir) / rid)
        else:
            out["files"] = {p.name: p.read_bytes() for p in sorted(tmp.iterdir()) if p.is_file()}
            shutil.rmtree(tmp, ignore_errors=True)
        tmp = None
    except Exception as e:  # a failed run is reported, never fatal to the sweep
        out["status"] = "failed"
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc(limit=20)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if runs_dir is not None:
            write_error(Path(runs_dir) / rid, out)
    out["seconds"] = time.perf_counter() - t0
    return out


def install(tmp: Path, final: Path) -> None:
    """Move a finished run's temporary directory into place (replacing a failed attempt)."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def write_files(final: Path, files: dict[str, bytes]) -> None:
    """Driver side of a remote run: write the returned files, then move them into place atomically."""
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for name, data in files.items():
        (tmp / Path(name).name).write_bytes(data)
    install(tmp, final)


def write_error(run_dir: Path, outcome: dict[str, Any]) -> None:
    """Record a failed run (no summary.json, so ``--resume`` runs it again)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    doc = {k: outcome.get(k) for k in ("id", "status", "error", "traceback", "host", "pid")}
    (run_dir / ERROR).write_text(json.dumps(doc, indent=2) + "\n")
