"""Where sweep runs execute: a local process pool (default) or an existing Ray cluster.

Both engines offer the same three calls to the sweep driver: ``submit(plan)`` returns a handle,
``wait(handles, timeout)`` returns the finished ``(handle, outcome)`` pairs, ``close()``. The driver keeps at
most ``capacity`` runs in flight, so "in flight" is "running" for the progress display.

* :class:`LocalPool` — ``concurrent.futures.ProcessPoolExecutor``, one process per concurrent run (fork on
  Linux after importing the simulator once, so a run starts in milliseconds). Pool processes die with the
  driver, even when it is killed with ``kill -9`` (:func:`megha.sweep.worker.die_with_parent`). A worker process
  that dies (out of memory, a crash in native code) breaks the pool: the pool is rebuilt; the runs that were in flight
  together are retried one at a time, so the run that kills its process alone is reported failed.
* :class:`RayPool` — Ray tasks on a running cluster (``address="auto"``, ``"ray://host:10001"``), or on a fresh
  local instance (``address="local"``), or on the session already started with ``ray.init()``. Ray is
  optional (``pip install "megha[ray]"``: ``ray[client]>=2.9``, the client part for ``ray://`` addresses) and
  imported only here. Runs return their output files to the driver, which writes them, so the cluster's nodes
  need megha installed but no shared file system.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Hashable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import ModuleType
from typing import Any

from megha.errors import InputError
from megha.sweep import worker


def default_workers() -> int:
    """Number of cores available to this process."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class LocalPool:
    """A process pool on this machine."""

    name = "local"

    def __init__(
        self,
        workers: int | None,
        runs_dir: str,
        plots: bool = False,
        csv: bool = False,
        schedulers: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        self._capacity = workers or default_workers()
        if self._capacity < 1:
            raise InputError(f"--workers must be at least 1, got {workers}")
        self.runs_dir = runs_dir
        self.plots = plots
        self.csv = csv
        self.suspects: set[str] = set()
        worker.warm_up(schedulers)
        self._pool = self._make_pool()

    @property
    def capacity(self) -> int:
        """Runs to keep in flight: one at a time while runs that were in flight during a crash are retried."""
        return 1 if self.suspects else self._capacity

    def _make_pool(self) -> ProcessPoolExecutor:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        pool = ProcessPoolExecutor(
            max_workers=self._capacity, mp_context=ctx, initializer=worker.die_with_parent, initargs=(os.getpid(),)
        )
        # start the processes now (before any progress-display thread exists in this process)
        for f in [pool.submit(worker._noop) for _ in range(self._capacity)]:
            f.result()
        return pool

    def submit(self, plan: dict[str, Any]) -> Future:
        """Start the run ``plan`` in a worker process; returns its future (the plan attached as ``.plan``)."""
        fut = self._pool.submit(worker.execute, plan, self.runs_dir, self.plots, self.csv)
        fut.plan = plan  # type: ignore[attr-defined]
        return fut

    def wait(self, handles: list[Future], timeout: float) -> list[tuple[Hashable, dict[str, Any]]]:
        """Wait up to ``timeout`` seconds for at least one of ``handles``; returns ``(handle, outcome)`` of every
        finished run (a broken pool is rebuilt and its runs retried or failed)."""
        done, _ = futures_wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        out: list[tuple[Hashable, dict[str, Any]]] = []
        broken = False
        for f in done:
            exc = f.exception()
            if exc is None:
                self.suspects.discard(f.plan["id"])  # type: ignore[attr-defined]
                out.append((f, f.result()))
            elif isinstance(exc, BrokenProcessPool):
                broken = True
            else:  # pickling errors and the like: report the run as failed
                plan = f.plan  # type: ignore[attr-defined]
                outcome = {
                    "id": plan["id"],
                    "status": "failed",
                    "error": f"{type(exc).__name__}: {exc}",
                    "seconds": 0.0,
                }
                worker.write_error(_path(self.runs_dir, plan["id"]), outcome)
                out.append((f, outcome))
        if broken:
            handled = {id(f) for f, _ in out}
            lost = []
            for f in handles:
                if id(f) in handled:
                    continue
                if f.done() and f.exception() is None:
                    out.append((f, f.result()))
                else:
                    lost.append(f)
            out.extend(self._recover(lost))
        return out

    def _recover(self, lost: list[Future]) -> list[tuple[Hashable, dict[str, Any]]]:
        """The pool broke (a worker process died): rebuild it. A run that was alone in flight is the culprit and
        fails; runs that were in flight together become suspects, retried one at a time."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._make_pool()
        out: list[tuple[Hashable, dict[str, Any]]] = []
        for f in lost:
            plan = f.plan  # type: ignore[attr-defined]
            if len(lost) == 1:
                self.suspects.discard(plan["id"])
                outcome = {
                    "id": plan["id"],
                    "status": "failed",
                    "seconds": 0.0,
                    "error": "the worker process running this run died (out of memory? a crash?)",
                }
                worker.write_error(_path(self.runs_dir, plan["id"]), outcome)
                out.append((f, outcome))
            else:
                self.suspects.add(plan["id"])
                out.append((f, {"id": plan["id"], "status": "retry"}))
        return out

    def close(self, cancel: bool = False) -> None:
        """Shut the pool down; ``cancel`` (an interrupted sweep) also stops the runs in progress."""
        if cancel:
            procs = list(getattr(self._pool, "_processes", {}).values())  # no public API before Python 3.14
            self._pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(timeout=10)
        else:
            self._pool.shutdown(wait=True)


def _path(runs_dir: str, rid: str) -> Path:
    return Path(runs_dir) / rid


def import_ray() -> ModuleType:
    """``import ray`` with a clear error when it is not installed."""
    try:
        import ray
    except ImportError:
        raise InputError(
            'running a sweep on Ray needs the ray package: pip install "ray>=2.9" '
            '(or pip install "megha[ray]"); without --address the sweep runs on a local process pool'
        ) from None
    return ray


def _require_ray_client(address: str) -> None:
    """A ``ray://`` address goes through Ray Client, which needs grpcio (``ray[client]``)."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        raise InputError(
            f'{address!r} is a Ray Client address, which needs pip install "ray[client]>=2.9" '
            '(included in pip install "megha[ray]"); or run the sweep on a machine of the cluster '
            "with --address auto"
        ) from None


class RayPool:
    """Ray tasks on a cluster; outputs come back to the driver as bytes."""

    name = "ray"

    def __init__(
        self, address: str | None, workers: int | None, runs_dir: str, plots: bool = False, csv: bool = False
    ) -> None:
        ray = import_ray()
        self.ray = ray
        self.runs_dir = runs_dir
        self.plots = plots
        self.csv = csv
        self._owns = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
            if address in (None, "local"):
                # a local instance started for this sweep: no usage reporting unless the user asked for it
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                ray.init(address=address, **kwargs)  # None: RAY_ADDRESS or a `ray start` cluster, else a new one
            else:
                if address.startswith("ray://"):
                    _require_ray_client(address)
                try:
                    ray.init(address=address, **kwargs)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    raise InputError(f"cannot connect to the Ray cluster at {address!r}: {e}") from None
            self._owns = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.capacity = max(1, workers or cpus)
        self._remote = ray.remote(num_cpus=1, max_retries=1)(worker.execute)
        self._plans: dict[Any, dict[str, Any]] = {}

    def submit(self, plan: dict[str, Any]) -> Any:
        """Start the run ``plan`` as a Ray task; returns its object reference."""
        ref = self._remote.remote(plan, None, self.plots, self.csv)
        self._plans[ref] = plan
        return ref

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Hashable, dict[str, Any]]]:
        """Wait up to ``timeout`` seconds for one of ``handles``; returns ``(handle, outcome)`` of the finished runs,
        their files written under the runs directory."""
        ray = self.ray
        ready, _ = ray.wait(list(handles), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            plan = self._plans.pop(ref)
            try:
                outcome = ray.get(ref)
            except Exception as e:  # the task or its worker died
                outcome = {"id": plan["id"], "status": "failed", "error": f"{type(e).__name__}: {e}", "seconds": 0.0}
            run_dir = _path(self.runs_dir, plan["id"])
            files = outcome.pop("files", None)
            if files is not None:
                worker.write_files(run_dir, files)
            elif outcome["status"] == "failed":
                worker.write_error(run_dir, outcome)
            out.append((ref, outcome))
        return out

    def close(self, cancel: bool = False) -> None:
        """Cancel the runs in flight if ``cancel``, and shut Ray down if this pool started it."""
        if cancel:
            for ref in list(self._plans):
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)
        if self._owns:
            self.ray.shutdown()
