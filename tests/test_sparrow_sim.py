"""Sparrow end to end: minimum delay, exactly-once without over-commit (hypothesis), determinism."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.summary import job_table
from megha.runner import simulate
from tests.tracegen import write_trace


@pytest.fixture(autouse=True)
def _components(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests look into the components' paths (some patch them): never the compiled loop, which
    tests/test_sparrow_lean.py compares with them."""
    monkeypatch.setenv("SPARROW_LEAN", "0")


def test_idle_datacenter_delay_is_four_network_delays():
    r = simulate(RunConfig(scheduler="sparrow", trace="sample:YH_small", cluster="sample:megha_G5L5S10000"))
    d = job_table(r.workload, r.recorder, r.feasible)["delay"]
    assert r.unfinished_reason is None
    assert np.allclose(d, 0.002, atol=1e-9), d  # probe, request, task, completion report
    started = np.isfinite(r.recorder.start)
    assert np.allclose(r.recorder.wq[started], 0.0)
    assert r.counters["sparrow_probes"] == 2 * r.workload.n_tasks


def test_overloaded_workers_queue_probes_and_record_worker_queuing():
    trace = write_trace([(i * 0.1, [2.0] * 4) for i in range(30)])
    r = simulate(RunConfig(scheduler="sparrow", trace=trace, workers=8, constraints=False))
    assert r.unfinished_reason is None
    assert r.recorder.wq.max() > 1.0 and r.counters["sparrow_probes_queued"] > 0
    alloc = r.recorder.start - r.recorder.arrival
    assert (alloc + 1e-9 >= r.recorder.wq).all()


def _random_trace(seed: int, jobs: int) -> str:
    """Jobs of 1-4 tasks at random instants, durations drawn at microsecond resolution: no two events fall at the very
    same instant by coincidence (the order of such events is the engine's insertion order, which skipped no-op round
    trips do not reproduce)."""
    rng = np.random.default_rng(seed)
    at = [round(float(i * 0.013 + rng.random() * 0.01), 6) for i in range(jobs)]
    return write_trace([(t, rng.uniform(0.01, 0.08, size=1 + i % 4).round(6).tolist()) for i, t in enumerate(at)])


@pytest.mark.parametrize(
    "scenario",
    [
        "contended",  # probes queue, no-ops, tasks of other groups, several ends at one instant
        "idle-windows",  # a probe reaches a worker while its skipped no-ops are still under way
        "cut-off",  # skipped no-op round trips under way when the run ends
    ],
)
def test_modelled_completion_reports_give_the_same_run_as_messages(monkeypatch, scenario):
    """The node monitors' common path models the ``Done`` message (the scheduler only records when it learns of the
    completion), routes single requests and answers to their handlers without message objects, and skips the round
    trips of probes whose answer can only be a no-op: every task's decision, start, end, worker, queuing,
    communication delay and completion-known instant, the run's end, the message counts and the counters are those
    of the run that sends every message."""
    from megha.metrics.fingerprint import fingerprint
    from megha.schedulers.sparrow.monitors import SparrowMonitors
    from megha.schedulers.sparrow.scheduler import SparrowScheduler

    if scenario == "contended":
        trace = write_trace(
            [(i * 0.2, [0.5 + (i * 7 % 5) * 0.5, 2.0, 1.0][: 1 + i % 3] * (1 + i % 4)) for i in range(60)]
        )
        cfg = RunConfig(scheduler="sparrow", trace=trace, workers=10, seed=4)
    else:
        cfg = RunConfig(
            scheduler="sparrow",
            trace=_random_trace(7, 150),
            workers=6,
            seed=2 if scenario == "idle-windows" else 3,
            network_delay=0.002 if scenario == "idle-windows" else 0.005,
        )
    calls = {"wake": 0, "cut": 0}
    wake, settle = SparrowMonitors._wake, SparrowMonitors.settle_skipped

    def counted_wake(self, w, now):
        calls["wake"] += 1
        return wake(self, w, now)

    def counted_settle(self, end):
        got = settle(self, end)
        calls["cut"] += sum(got)
        return got

    monkeypatch.setattr(SparrowMonitors, "_wake", counted_wake)
    monkeypatch.setattr(SparrowMonitors, "settle_skipped", counted_settle)
    fast = simulate(cfg)
    with monkeypatch.context() as mp:
        # every Done, Request and Grant a real message (no modelled Done, no direct routing, no skipped no-ops)
        mp.setattr(SparrowMonitors, "on_start", lambda self, now: None)
        mp.setattr(SparrowScheduler, "on_start", lambda self, now: setattr(self, "direct", False))
        slow = simulate(cfg)
    assert fast.unfinished_reason is None and slow.unfinished_reason is None
    assert fast.events < slow.events
    if scenario == "idle-windows":
        assert calls["wake"] > 0
    if scenario == "cut-off":
        assert calls["cut"] > 0
    for col in ("scheduled", "start", "end", "known", "worker", "comm", "wq"):
        assert np.array_equal(getattr(fast.recorder, col), getattr(slow.recorder, col), equal_nan=True), col
    assert fingerprint(fast) == fingerprint(slow)
    assert fast.end_time == slow.end_time
    assert fast.message_counts == slow.message_counts
    assert fast.counters == slow.counters


def test_builder_models_done_messages_only_without_faults_or_processing_costs():
    """The builder tells the node monitors whether they may model ``Done`` (BuildContext.faults / processing): a run
    with a fault schedule or processing costs sends every message, so a crashed scheduler learns nothing while down."""
    from megha.runner import load_inputs
    from megha.runner.simulate import build

    trace = write_trace([(0.0, [1.0, 2.0])])
    base = RunConfig(scheduler="sparrow", trace=trace, workers=4, constraints=False)
    faults = {"fault": [{"at": 1, "kind": "scheduler", "target": 0, "down_for": 1}]}
    for cfg, modelled in [
        (base, True),
        (base.model_copy(update={"faults": faults}), False),
        (base.model_copy(update={"processing_model": "measured"}), False),
    ]:
        w, dc = load_inputs(cfg)
        _, _, dep, _, _ = build(cfg, w, dc)
        monitors = dep.components[0]
        assert (monitors.done_delay is not None) == modelled, cfg
        if modelled:
            assert monitors.done_delay == cfg.network_delay
