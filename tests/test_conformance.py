"""One conformance suite for every registered scheduler (installed plugins included).

For small random workloads on small generated datacenters (placement constraints on, so some tasks are
infeasible and constraints bite), in every mode the scheduler supports:

* every feasible task finishes exactly once, and the scheduler learns of it after it finished;
* infeasible tasks are reported (``tasks_infeasible``) and never run;
* no task starts before it arrives, and the run that finished lasted the task's duration;
* no worker is ever over-allocated (one task per worker in slot mode; the sum of requests within the worker's
  capacity in resource mode), counting runs cut short by preemption;
* every task ran on a worker that has all of its placement constraints;
* nothing is left in a scheduler's queues at the end (counters named ``*left_queued`` are 0);
* the same seed gives identical results.

Each family's options worth varying are drawn too (``OPTION_SPACES``). A scheduler registered as
``unbounded`` (``ideal``: unlimited capacity, a lower bound) is exempt from the capacity and constraint checks,
and only from those. Scheduler-specific behaviour is tested beside each family.
Examples are derandomized so CI sees the same cases every time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.metrics.result import RunResult
from megha.runner import simulate
from megha.runner.faults import crash_targets
from megha.schedulers import registry
from tests.tracegen import job_strategy, write_trace

CASES = [(name, mode) for name in registry.names() for mode in registry.get(name).modes]

# slower families get fewer examples (each example is a whole simulation)
_EXAMPLES = {"macrm": 20, "flow": 12}
_DEFAULT_EXAMPLES = 40


job_st = job_strategy()

_POLICY = st.sampled_from(["random", "min-constraints", "first"])
# each family's options worth varying (the rest keep their defaults); a plugin not listed runs with its defaults
OPTION_SPACES = {
    "megha": st.fixed_dictionaries(
        {
            "policy": _POLICY,
            "heartbeat": st.sampled_from([0.5, 5.0]),
            "profile": st.sampled_from(["paper", "megha20", "iot23"]),
            "queue": st.sampled_from(["fifo", "fewest-tasks"]),
        }
    ),
    "pigeonc": st.fixed_dictionaries(
        {
            "masters": st.integers(1, 4),
            "distributors": st.integers(1, 3),
            "policy": _POLICY,
            "fqw": st.integers(0, 3),
            "cutoff": st.sampled_from([0.5, 2.0, 100.0]),
        }
    ),
    "sparrow": st.fixed_dictionaries(
        {"schedulers": st.integers(1, 3), "probe_ratio": st.sampled_from([1.0, 1.5, 2.0, 3.0])}
    ),
    "yarn": st.fixed_dictionaries(
        {
            "heartbeat": st.sampled_from([0.3, 1.0, 3.0]),
            "queue": st.sampled_from(["fifo", "fair"]),
            "am_overhead": st.sampled_from([0.0, 0.5]),
        }
    ),
    "macrm": st.fixed_dictionaries(
        {
            "trackers": st.integers(1, 3),
            "switch_load": st.sampled_from([0.1, 0.9]),
            "rate": st.sampled_from(["adaptive", "fixed"]),
            "max_retries": st.integers(0, 3),
            "queue": st.sampled_from(["fifo", "fair"]),
            "gang": st.booleans(),
            "actors": st.integers(1, 3),
            "jm_placement": st.sampled_from(["heartbeat", "sampling"]),
            "jm_demand": st.just({"cpu": 0.5, "mem": 0.25}),
            "heartbeat": st.just(0.5),
        }
    ),
}
OPTION_SPACES["megha-central"] = OPTION_SPACES["megha"]
OPTION_SPACES["pigeon"] = OPTION_SPACES["pigeonc"]


def _fit(name: str, options: dict, workers: int) -> dict:
    """Options that must respect the datacenter's size."""
    if "masters" in options:
        options = {**options, "masters": min(options["masters"], workers)}
    return options


def config(
    name: str,
    mode: str,
    trace: str,
    workers: int,
    groups: int,
    seed: int,
    constraints: bool = True,
    options: dict | None = None,
) -> RunConfig:
    kw: dict = dict(
        scheduler=name,
        trace=trace,
        workers=workers,
        seed=seed,
        constraints=constraints,
        options=_fit(name, options or {}, workers),
        stall_timeout=3600.0,
    )
    if groups > 1 and workers >= groups * groups:
        kw.update(gms=groups, lms=groups)
    if mode == "resource":
        kw.update(resources=True, capacity={"cpu": 4.0, "mem": 8.0}, demand={"cpu": 2.0, "mem": 1.0})
    return RunConfig(**kw)


def runs_of(r: RunResult) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every run of every task on a worker: (task, worker, start, stop), finished runs and preempted ones."""
    rec = r.recorder
    done = np.flatnonzero(np.isfinite(rec.start))
    tasks = [done]
    workers = [rec.worker[done]]
    starts = [rec.start[done]]
    stops = [rec.end[done]]
    for ids, st_, ws, stop in rec.preempted_runs:
        tasks.append(ids)
        workers.append(ws)
        starts.append(st_)
        stops.append(np.full(ids.size, stop))
    return np.concatenate(tasks), np.concatenate(workers), np.concatenate(starts), np.concatenate(stops)


def assert_no_overallocation(r: RunResult) -> None:
    """Sweep each worker's runs in time order: usage never exceeds capacity (ends before starts at a tie)."""
    task, worker, start, stop = runs_of(r)
    assert (worker >= 0).all(), "a task ran on no worker"
    dc = r.datacenter
    demand = np.ones((task.size, 1)) if dc.capacity is None else r.workload.task_demand[task]
    cap = np.ones((dc.n_workers, 1)) if dc.capacity is None else dc.capacity
    times = np.concatenate([start, stop])
    is_start = np.concatenate([np.ones(task.size, bool), np.zeros(task.size, bool)])
    w = np.concatenate([worker, worker])
    d = np.concatenate([demand, -demand])
    order = np.lexsort((is_start, times, w))  # by worker, then time, ends first at equal times
    w, d = w[order], d[order]
    used = np.zeros_like(cap)
    for i in range(w.size):
        used[w[i]] += d[i]
        assert (used[w[i]] <= cap[w[i]] + 1e-9).all(), f"worker {w[i]} over-allocated: {used[w[i]]} > {cap[w[i]]}"


def assert_constraints_respected(r: RunResult) -> None:
    task, worker, _, _ = runs_of(r)
    tm = r.workload.masks[task]
    wm = r.datacenter.worker_masks[worker]
    bad = (tm & ~wm) != 0
    assert not bad.any(), f"tasks {task[bad][:5].tolist()} ran on workers without their constraints"


def results_of(counters: dict) -> dict:
    """Counters without wall-clock measurements (flow's solver time per round is a measurement, not a result)."""
    return {k: v for k, v in counters.items() if not (k.endswith("_us") or "_us_" in k or "wall" in k)}


def check(r: RunResult, unbounded: bool) -> None:
    rec = r.recorder
    ok = r.feasible
    assert r.unfinished_reason is None, r.unfinished_reason
    assert (rec.finishes[ok] == 1).all(), "a feasible task did not finish exactly once"
    assert (rec.finishes[~ok] == 0).all() and (rec.launches[~ok] == 0).all(), "an infeasible task ran"
    assert r.counters["tasks_infeasible"] == int((~ok).sum())
    assert (rec.start[ok] >= rec.arrival[ok] - 1e-12).all(), "a task started before it arrived"
    assert np.allclose(rec.end[ok] - rec.start[ok], r.workload.task_duration[ok], rtol=1e-9, atol=1e-9)
    assert (rec.known[ok] >= rec.end[ok] - 1e-12).all(), "the scheduler learned of a completion before it"
    left = {k: v for k, v in r.counters.items() if k.endswith("left_queued") and v}
    assert not left, f"requests left queued at the end: {left}"
    if not unbounded:
        assert_no_overallocation(r)
        assert_constraints_respected(r)


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_conformance(name: str, mode: str, tmp_path: Path) -> None:
    unbounded = registry.get(name).unbounded

    @given(
        jobs=st.lists(job_st, min_size=1, max_size=20),
        workers=st.integers(1, 30),
        groups=st.integers(1, 3),
        seed=st.integers(0, 10_000),
        constraints=st.booleans(),
        options=OPTION_SPACES.get(name, st.just({})),
    )
    @settings(
        max_examples=_EXAMPLES.get(name, _DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    def prop(jobs, workers, groups, seed, constraints, options) -> None:
        trace = write_trace(jobs, tmp_path / "w.tr")
        check(simulate(config(name, mode, trace, workers, groups, seed, constraints, options)), unbounded)

    prop()


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_same_seed_same_results(name: str, mode: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    jobs = [
        (round(float(a), 3), [round(float(x), 3) for x in rng.uniform(0.1, 4, rng.integers(1, 8))])
        for a in np.sort(rng.uniform(0, 10, 25))
    ]
    trace = write_trace(jobs, tmp_path / "w.tr")
    a = simulate(config(name, mode, trace, 12, 2, seed=3))
    b = simulate(config(name, mode, trace, 12, 2, seed=3))
    assert fingerprint(a) == fingerprint(b)
    assert results_of(a.counters) == results_of(b.counters)
    check(a, registry.get(name).unbounded)


def test_every_registered_scheduler_is_covered() -> None:
    assert {n for n, _ in CASES} == set(registry.names())


PLUGIN_SRC = Path(__file__).resolve().parents[1] / "examples" / "plugin" / "src"


@pytest.fixture
def example_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The example plug-in (examples/plugin: ``random-fifo``) registered as if installed (unless it is), with every
    other plug-in; the registry is restored afterwards. Yields the plug-ins' names."""
    import sys

    registry.names()  # the built-in families and installed plug-ins, loaded once per process
    saved = dict(registry._REGISTRY)
    monkeypatch.syspath_prepend(str(PLUGIN_SRC))
    if "random-fifo" not in registry._REGISTRY:
        sys.modules.pop("megha_random_fifo", None)
        import megha_random_fifo  # noqa: F401 - its import registers random-fifo

        registry._REGISTRY["random-fifo"].plugin = "megha_random_fifo"
    yield [n for n in registry.names() if registry.get(n).plugin is not None]
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    sys.modules.pop("megha_random_fifo", None)


def test_plugins_pass_the_same_conformance_checks(example_plugin: list[str], tmp_path: Path) -> None:
    """A plug-in is held to the suite as a built-in scheduler is: the example plug-in runs the same property test
    and same-seed test in every mode it registers (an installed plug-in is also among ``CASES``)."""
    assert "random-fifo" in example_plugin
    for name in example_plugin:
        for mode in registry.get(name).modes:
            test_conformance(name, mode, tmp_path)
            test_same_seed_same_results(name, mode, tmp_path)


def test_the_checks_catch_overallocation_and_constraint_violations(tmp_path: Path) -> None:
    trace = write_trace([(0.0, [5.0, 5.0, 5.0])], tmp_path / "w.tr")
    r = simulate(RunConfig(scheduler="megha", trace=trace, workers=8, seed=1, constraints=False))
    check(r, unbounded=False)
    w = r.recorder.worker
    w[1] = w[0]  # two overlapping runs on one single-slot worker
    with pytest.raises(AssertionError, match="over-allocated"):
        assert_no_overallocation(r)
    r.workload = replace(r.workload, task_mask=np.full(r.workload.n_tasks, 1 << 3, dtype=np.uint32))
    r.datacenter = replace(r.datacenter, worker_masks=np.zeros_like(r.datacenter.worker_masks))
    with pytest.raises(AssertionError, match="without their constraints"):
        assert_constraints_respected(r)


# --- under faults: random crashes of the scheduler's own components --------------------------------------------------
def crash_kinds(name: str, mode: str, trace: str) -> dict[str, int]:
    """The component kinds a fault schedule can crash in a deployment of ``name``, with how many of each."""
    seen: dict[str, int] = {}

    def grab(engine) -> None:
        comps = [c for a, c in engine.components.items() if a not in ("source", "watchdog")]
        seen.update({k: len(v) for k, v in crash_targets(comps).items()})

    simulate(config(name, mode, trace, 8, 2, 0), instrument=grab)
    return seen


# ideal is a bound (MACRM's agents have their own fault kinds; only its client crashes generically)
FAULT_CASES = [(n, m) for n, m in CASES if not registry.get(n).unbounded]


@pytest.mark.parametrize(("name", "mode"), FAULT_CASES, ids=[f"{n}-{m}" for n, m in FAULT_CASES])
def test_conformance_under_crashes(name: str, mode: str, tmp_path: Path) -> None:
    """Random crashes (at random times, for random lengths, restarts at once included) of the scheduler's components:
    the same checks as without faults."""
    trace0 = write_trace([(0.0, [1.0])], tmp_path / "probe.tr")
    kinds = sorted(crash_kinds(name, mode, trace0))

    @given(
        jobs=st.lists(job_st, min_size=1, max_size=12),
        workers=st.integers(4, 20),
        seed=st.integers(0, 10_000),
        faults=st.lists(
            st.tuples(st.sampled_from(kinds), st.floats(0, 8), st.sampled_from([0.0, 0.2, 2.0, 10.0])),
            min_size=1,
            max_size=4,
        ),
    )
    @settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    def prop(jobs, workers, seed, faults) -> None:
        trace = write_trace(jobs, tmp_path / "w.tr")
        cfg = config(name, mode, trace, workers, 2, seed)
        schedule = {
            "seed": seed,
            "fault": [{"at": at, "kind": k, "target": "random", "down_for": d} for k, at, d in faults],
        }
        check(simulate(cfg.model_copy(update={"faults": schedule})), unbounded=False)

    prop()
