"""PigeonC/Pigeon end to end: minimum delay, exactly-once without over-commit (hypothesis), determinism."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.summary import job_table
from megha.runner import simulate
from tests.tracegen import write_trace


@pytest.mark.parametrize("sched", ["pigeonc", "pigeon"])
def test_idle_datacenter_delay_is_three_network_delays(sched):
    r = simulate(RunConfig(scheduler=sched, trace="sample:YH_small", cluster="sample:pigeon_D10M100S10000"))
    d = job_table(r.workload, r.recorder, r.feasible)["delay"]
    assert r.unfinished_reason is None
    assert np.allclose(d, 0.0015, atol=1e-9), d  # distributor->master, master->worker, master->distributor
    assert r.describe["masters"] == 100 and r.describe["distributors"] == 10 and r.describe["fqw"] == 20


def test_same_seed_same_result_and_seed_changes_choices():
    trace = write_trace([(i * 0.3, [1.0 + (i * 7 % 5)] * (1 + i % 6)) for i in range(40)])

    def run(seed):
        return simulate(
            RunConfig(
                scheduler="pigeonc", trace=trace, workers=12, seed=seed, options={"masters": 3, "distributors": 2}
            )
        )

    a, b, c = run(3), run(3), run(4)
    assert np.array_equal(a.recorder.start, b.recorder.start, equal_nan=True)
    assert np.array_equal(a.recorder.worker, b.recorder.worker)
    assert not np.array_equal(a.recorder.worker, c.recorder.worker)


def test_bad_option_is_a_clear_error():
    from megha.errors import InputError

    with pytest.raises(InputError, match="policy"):
        simulate(RunConfig(scheduler="pigeonc", trace="sample:YH_small", workers=10, options={"policy": "best"}))


@pytest.mark.parametrize(
    ("sched", "options"),
    [
        ("pigeonc", {}),
        ("pigeonc", {"profile": "iot23", "fqw": 2}),
        ("pigeon", {"reserve": 0.25, "cutoff": 3.0}),
    ],
)
def test_workers_in_process_give_the_same_run_as_separate_worker_components(monkeypatch, sched, options):
    """The simulator's in-process workers (SimPigeonMaster) reproduce the multi-component form exactly: every
    task's decision, start, end, worker and completion-known instant, the run's end and the message counts."""
    import megha.schedulers.pigeon as pigeon_pkg
    from megha.metrics.fingerprint import fingerprint

    # contended: queues form at the masters, tasks of a job end at the same instant, short and long jobs mix
    trace = write_trace(
        [(i * 0.4, [1.0 + (i * 7 % 5), 2.5, 1.0 + (i % 3)][: 1 + i % 3] * (1 + i % 4)) for i in range(60)]
    )
    cfg = RunConfig(
        scheduler=sched, trace=trace, workers=16, seed=2, options={"masters": 4, "distributors": 2, **options}
    )
    fast = simulate(cfg)
    monkeypatch.setattr(pigeon_pkg, "workers_in_process", lambda ctx: False)
    slow = simulate(cfg)
    assert fast.unfinished_reason is None and slow.unfinished_reason is None
    assert fast.events < slow.events
    for col in ("scheduled", "start", "end", "known", "worker", "comm"):
        assert np.array_equal(getattr(fast.recorder, col), getattr(slow.recorder, col), equal_nan=True), col
    assert fingerprint(fast) == fingerprint(slow)
    assert fast.end_time == slow.end_time
    assert fast.message_counts == slow.message_counts
    assert fast.counters == slow.counters


def test_in_process_workers_reject_over_commit_and_report_ends():
    from megha.errors import SimulationError
    from megha.metrics.recorder import TaskRecorder
    from megha.schedulers.pigeon.simmaster import SimPigeonMaster
    from megha.sim.component import RecordingPort

    class SimPort(RecordingPort):  # the simulator-only calls of the engine's port
        def set_timer_at(self, at, key):
            return self.set_timer(at, key)

        def count_message(self, cls, n=1):
            self.counted = getattr(self, "counted", 0) + n

    rec = TaskRecorder(np.zeros(4))
    rec.expect(4)
    m = SimPigeonMaster("m", np.array([0, 1]), np.zeros(2, dtype=np.uint32), "w", rec, ["d"])
    m.attach(SimPort(0))
    m.on_start(0.0)
    m.dist_of.update({0: 0, 1: 0})
    m._launch([0], [0], [2.0], 0.0)
    with pytest.raises(
        SimulationError, match=r"^w: worker 0 over-committed at t=0\.500500: task 1 launched while it runs"
    ):
        m._launch([1], [0], [1.0], 0.5)  # the worker ledger's one error, at the launch's start
    with pytest.raises(SimulationError, match="not in this group"):
        m._launch([1], [5], [1.0], 0.5)
    ((at, key),) = m.port.timers.values()
    assert at == 0.0005 + 2.0  # launch delay, then the duration
    free = m.n_free
    m.on_timer(key, at)
    assert rec.start[0] == 0.0005 and rec.end[0] == at and rec.known[0] == at + 0.0005
    assert m.ledger.running_on(0) == -1 and m.n_free == free + 1  # nothing queued: the worker is free again


def test_compiled_random_pick_is_the_index_pick():
    """take_random chooses the worker SegmentedIndex.pick chooses with the random policy for the same uniform
    number, clears it, and finds none exactly when pick finds none."""
    from megha.model.matching import FastRandom, Policy, SegmentedIndex
    from megha.schedulers.pigeon._kernels import take_random

    rng = np.random.default_rng(7)
    for n in (1, 63, 64, 100, 200):
        idx = SegmentedIndex([np.arange(n)], np.zeros(n, dtype=np.uint32))
        for _ in range(40):
            avail = idx.pack_workers(rng.random(n) < rng.random())
            static = idx.pack_workers(rng.random(n) < 0.7)
            seed = int(rng.integers(1 << 30))
            want = idx.pick(avail & static, 0, Policy.RANDOM, FastRandom(np.random.default_rng(seed)))
            u = FastRandom(np.random.default_rng(seed)).peek()
            got = avail.copy()
            b = take_random(got, static, u)
            assert (b if b < 0 else int(idx.worker_at_bit[b])) == want
            if b >= 0:
                assert not idx.has_worker(got, want) and idx.has_worker(avail, want)
                idx.set_worker(got, want, True)
            assert np.array_equal(got, avail)
