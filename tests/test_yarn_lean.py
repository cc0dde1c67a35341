"""The compiled simulation of ``yarn``'s common configuration gives the components' results exactly.

Each case runs the same configuration twice, with the compiled loop (``YARN_LEAN=1``) and with the components
(``YARN_LEAN=0``), and compares the per-task fingerprint, the engine's events and end time, the message counts and
the counters.
"""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.runner import simulate
from megha.schedulers.centralized import _lean
from megha.schedulers.centralized.heartbeats import HeartbeatSchedule
from tests.leanutil import BUSY_TASK, assert_cold_threshold, both_ways
from tests.leanutil import assert_same_run as _same

_both = both_ways("YARN_LEAN")


@pytest.mark.parametrize(("workers", "seed", "jobs"), [(600, 0, 400), (300, 3, 300), (2000, 7, 500)])
def test_goog_prefix_sizes_and_seeds(monkeypatch: pytest.MonkeyPatch, workers: int, seed: int, jobs: int) -> None:
    """Constrained jobs under load (a long FIFO queue of many masks, bookings at arrival), other seeds and sizes."""
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=workers, seed=seed, max_jobs=jobs)
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.counters["yarn_allocated_from_queue"] > 0 and slow.counters["yarn_allocated_at_arrival"] > 0


@pytest.mark.parametrize(
    "options", [{"scan": "first"}, {"heartbeat": 3.0}, {"heartbeat": 0.25, "scan": "first"}], ids=str
)
def test_scans_and_heartbeat_periods(monkeypatch: pytest.MonkeyPatch, options: dict) -> None:
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=500, max_jobs=300, options=options)
    _same(*_both(monkeypatch, cfg))


def test_no_constraints_heavy_load_whole_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unconstrained jobs on few nodes under load, whole-second durations and arrivals (no dephasing)."""
    cfg = RunConfig(
        scheduler="yarn",
        trace="sample:synthetic_FB_sub_2000jobs",
        workers=150,
        constraints=False,
        max_jobs=300,
        load_scale=4.0,
        truncate_durations=True,
        dephase=False,
    )
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize("delay", [0.0, 0.002])
def test_other_network_delays(monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=400, max_jobs=200, network_delay=delay)
    _same(*_both(monkeypatch, cfg))


def test_shared_heartbeat_instants_give_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes with the same heartbeat phase report containers at the same instant (one heartbeat event for several):
    the compiled loop does not model that; it gives up before recording anything and the components run."""
    real = HeartbeatSchedule.random

    def clumped(n: int, period: float, rng: np.random.Generator, lag: float = 0.0) -> HeartbeatSchedule:
        s = real(n, period, rng, lag)
        return HeartbeatSchedule(np.round(s.phases * 4) / 4, s.period)  # four phases

    monkeypatch.setattr(HeartbeatSchedule, "random", staticmethod(clumped))
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=300, max_jobs=100)
    _same(*_both(monkeypatch, cfg), compiled=False)


@pytest.mark.parametrize(
    "extra",
    [
        {"options": {"queue": "fair"}},
        {"options": {"queue": "fewest-tasks"}},
        {"options": {"scan": "random"}},
        {"options": {"am_overhead": 2.0}},
        {"resources": True},
        {"processing_model": "measured"},
        {"faults": {"fault": [{"at": 1.0, "kind": "worker", "target": 0.2, "down_for": 30.0}]}},
    ],
    ids=str,
)
def test_not_dispatched_elsewhere(monkeypatch: pytest.MonkeyPatch, extra: dict) -> None:
    """Configurations the compiled loop does not model run the components."""
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=300, max_jobs=60, **extra)
    _same(*_both(monkeypatch, cfg), compiled=False)


def test_cold_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``YARN_LEAN=0`` never builds the compiled run; unset, a small run uses it only when it is compiled."""
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=200, max_jobs=20)
    assert_cold_threshold(monkeypatch, _lean.SWITCH, cfg)


@pytest.mark.parametrize("switch", ["1", "0"])
def test_over_commit_raises_the_node_managers_error(monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    """A launch to a node that runs a container (here every node of the node managers' ledger runs task 10**9 from
    the start) is the ledger's over-commit error, compiled or not."""
    from megha.errors import SimulationError
    from megha.schedulers.centralized import simrm

    class Busy(simrm.WorkerLedger):
        def __init__(self, *args: object, **kw: object) -> None:
            super().__init__(*args, **kw)
            self.task[:] = [BUSY_TASK] * len(self.task)

    monkeypatch.setattr(simrm, "WorkerLedger", Busy)
    monkeypatch.setenv("YARN_LEAN", switch)
    cfg = RunConfig(scheduler="yarn", trace="sample:GOOG_subtrace", workers=200, max_jobs=20)
    want = r"^yarn/rm: worker \d+ over-committed at t=\d+\.\d{6}: task \d+ launched while it runs task 10{9}$"
    with pytest.raises(SimulationError, match=want):
        simulate(cfg)
