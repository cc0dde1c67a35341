"""The packing scheduler with in-process workers against the two-component form (scheduler + worker pool).

Traces full of ties — arrivals on half slots, durations in multiples of the network delay — make reports reach the
scheduler at the very instant of a slot pass or of a job arrival; both forms must make the same policy calls in the
same order and give the same per-task results, counters, message counts and end time.
"""

from __future__ import annotations

import numpy as np
import pytest

import megha.schedulers.packing as packing
from megha.config import RunConfig
from megha.errors import SimulationError
from megha.metrics.fingerprint import fingerprint
from megha.runner import simulate
from megha.runner.inputs import load_inputs
from megha.runner.simulate import build
from megha.schedulers.packing.inprocess import InFlight, InProcessPackingScheduler, min_duration
from megha.schedulers.packing.policies import POLICIES
from tests.tracegen import write_trace

D = 0.0005  # the default one-way network delay


class LoggingPolicy:
    """A policy that logs every call the scheduler makes to it (arrive, depart, schedule and its answer)."""

    def __init__(self, inner, log: list) -> None:
        self.inner = inner
        self.log = log

    def arrive(self, jobs, sizes) -> None:
        self.log.append(("arrive", list(jobs), list(sizes)))
        self.inner.arrive(jobs, sizes)

    def depart(self, job, server) -> None:
        self.log.append(("depart", job, server))
        self.inner.depart(job, server)

    def schedule(self):
        got = self.inner.schedule()
        self.log.append(("schedule", list(got)))
        return got

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _tie_trace(seed: int, n_jobs: int = 60, base: float = 0.0) -> str:
    """Jobs arriving on half slots, with durations that are multiples of the delay (and longer than the minimum)."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.integers(0, 120, n_jobs)) * D + base
    durs = np.array([5, 6, 7, 8, 9, 10, 19, 20, 21, 40]) * D
    jobs = [(float(a), [float(x) for x in rng.choice(durs, rng.integers(1, 5))]) for a in arrivals]
    return write_trace(jobs)


def _run(cfg: RunConfig, in_process: bool, monkeypatch: pytest.MonkeyPatch):
    log: list = []
    real = packing.make_policy
    with monkeypatch.context() as m:
        m.setattr(packing, "make_policy", lambda *a, **k: LoggingPolicy(real(*a, **k), log))
        m.setattr(packing, "_in_process", lambda ctx: in_process)
        res = simulate(cfg)
    return res, log


def _cfg(name: str, trace: str, resources: bool, seed: int, report: float, net: float = D) -> RunConfig:
    kw = dict(
        scheduler=name,
        trace=trace,
        workers=4,
        seed=seed,
        constraints=False,
        worker_report_delay=report,
        network_delay=net,
    )
    if resources:
        kw.update(resources=True, capacity={"cpu": 4.0, "mem": 8.0}, demand={"cpu": 1.0, "mem": 3.0})
    return RunConfig(**kw)


def _segments(log: list) -> list:
    """The calls between two scheduling passes as (arrivals in order, departures in order): a job arrival and a report
    at the same instant commute (arrive touches only the queue side of a policy, depart only the server side), and
    with no report delay the engine orders them by when the trace source armed its timer, which the in-process form
    does not see; it applies the report first."""
    out: list = []
    arr: list = []
    dep: list = []
    for call in log:
        if call[0] == "schedule":
            out.append((arr, dep, call))
            arr, dep = [], []
        else:
            (arr if call[0] == "arrive" else dep).append(call)
    out.append((arr, dep, None))
    return out


def _ties(res) -> tuple[int, int]:
    """Reports that reached the scheduler at the instant of a slot pass, and at the instant of a job arrival."""
    rec = res.recorder
    known = rec.known[np.isfinite(rec.known)]
    passes = np.unique(rec.scheduled[np.isfinite(rec.scheduled)])
    arrivals = np.unique(res.workload.job_arrival)
    return int(np.isin(known, passes).sum()), int(np.isin(known, arrivals).sum())


CASES = (  # seed, time offset, resource mode, report delay, network delay
    (1, 0.0, False, 0.0, D),
    (2, 0.0, True, D, D),
    (3, 1000.0, True, 0.0003, D),
    (4, 1406471.0, False, D, D),
    (5, 0.0, False, D, 0.001),
)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_same_calls_and_results_as_the_pool(name, monkeypatch):
    ties = np.zeros(2, dtype=np.int64)
    for seed, base, resources, report, net in CASES:
        cfg = _cfg(name, _tie_trace(seed, base=base), resources, seed, report, net)
        pool, pool_log = _run(cfg, False, monkeypatch)
        inproc, in_log = _run(cfg, True, monkeypatch)
        assert pool.unfinished_reason is None and inproc.unfinished_reason is None
        assert _segments(in_log) == _segments(pool_log)
        if report > 0:  # reports are sent before the arrivals at their instant: the very same calls
            assert in_log == pool_log
        assert fingerprint(inproc) == fingerprint(pool)
        for col in ("scheduled", "start", "end", "known", "worker", "comm"):
            assert np.array_equal(getattr(inproc.recorder, col), getattr(pool.recorder, col), equal_nan=True), col
        assert inproc.counters == pool.counters
        assert inproc.message_counts == pool.message_counts
        assert inproc.end_time == pool.end_time
        assert inproc.events < pool.events
        ties += _ties(pool)
    assert (ties > 0).all(), ties  # the traces do put reports on slot passes and on arrivals


def test_builder_uses_in_process_workers_only_when_the_order_is_kept(tmp_path):
    long = write_trace([(0.0, [1.0, 2.0]), (0.5, [3.0])])
    short = write_trace([(0.0, [1.0, 0.001]), (0.5, [3.0])])  # 1 ms <= 2 (d_sw + d_ws), d_ws = 0 by default
    assert min_duration(D, 0.0) > 0.001
    cfg = RunConfig(scheduler="bf-js", trace=long, workers=2)
    _, _, dep, _, _ = build(cfg, *load_inputs(cfg))
    assert [type(c) for c in dep.components] == [InProcessPackingScheduler]
    for cfg in (
        RunConfig(scheduler="bf-js", trace=short, workers=2),
        RunConfig(scheduler="bf-js", trace=long, workers=2, processing={"scheduler": 1e-5}),
    ):
        _, _, dep, _, _ = build(cfg, *load_inputs(cfg))
        assert len(dep.components) == 2  # pool + scheduler
    res = simulate(RunConfig(scheduler="bf-js", trace=short, workers=2))
    assert res.unfinished_reason is None and res.message_counts["Launch"] > 0


def test_in_flight_groups_ends_like_the_pool_timers():
    fl = InFlight(D, D)
    start = fl.launch([0, 1, 2], [5, 6, 7], [1.0, 2.0, 1.0], 10.0)
    assert start == 10.0 + D
    assert fl.tasks == 3 and len(fl.heap) == 2  # tasks 0 and 2 end at the same instant: one group
    fl.launch([3], [8], [1.0], 10.0)  # joins the open group of the same end instant
    g = fl.pop()
    e = start + 1.0
    assert g[3] == e and g[1] == start + (e - start) and g[0] == g[1] + D
    assert g[4] == [0, 2, 3] and g[5] == [5, 7, 8]
    assert fl.last()[4] == [1] and fl.tasks == 1
    fl.pop()
    assert fl.last() is None and not fl.open


def test_in_flight_reports_of_one_instant_come_by_end_timer_then_creation():
    """Groups whose reports arrive at the same instant (one heap entry) come out in (end timer, creation) order, as
    the pool's reports would, whatever the order they were filed in."""
    fl = InFlight(D, D)
    groups = [[1.0, at, seq, 10.0 + seq, [seq], [seq], None] for seq, at in enumerate([0.5, 0.4, 0.5, 0.3, 0.45])]
    for g in groups:
        fl.open[g[3]] = g
        fl.tasks += 1
        fl.file(g)
    later = [2.0, 1.5, 9, 99.0, [9], [9], None]
    fl.open[later[3]] = later
    fl.tasks += 1
    fl.file(later)
    assert len(fl.heap) == 2 and fl.first() is groups[3] and fl.last() is later
    out = [fl.pop()[2] for _ in range(6)]
    assert out == [3, 1, 4, 0, 2, 9] and fl.tasks == 0 and not fl.open and not fl.due


def test_over_commit_raises_the_ledger_error(monkeypatch):
    """A policy that places a task on a busy worker is caught by the in-process workers' ledger."""

    class TwiceOnZero:
        def __init__(self, inner) -> None:
            self.inner = inner
            self.q: list[int] = []

        def arrive(self, jobs, sizes) -> None:
            self.q += list(jobs)

        def depart(self, job, server) -> None:
            pass

        def schedule(self):
            out = [(j, 0) for j in self.q]
            self.q = []
            return out

        def queue_len(self) -> int:
            return len(self.q)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    real = packing.make_policy
    monkeypatch.setattr(packing, "make_policy", lambda *a, **k: TwiceOnZero(real(*a, **k)))
    cfg = RunConfig(scheduler="bf-j", trace=write_trace([(0.0, [1.0, 1.0])]), workers=2, constraints=False)
    with pytest.raises(SimulationError, match="worker 0 over-committed"):
        simulate(cfg)


def test_a_crashed_in_process_scheduler_is_refused():
    """Suspending the scheduler (an experiment's action; fault schedules use the pool) would hold reports it cannot
    hold: its recovery raises instead of giving other results."""
    cfg = RunConfig(scheduler="bf-js", trace=write_trace([(0.0, [1.0]), (2.0, [1.0])]), workers=2, constraints=False)
    actions = [
        (0.5, lambda engine, dep, now: engine.suspend(dep.components[0].address)),
        (0.7, lambda engine, dep, now: engine.resume(dep.components[0].address)),
    ]
    with pytest.raises(SimulationError, match="crashed scheduler"):
        simulate(cfg, actions=actions)
