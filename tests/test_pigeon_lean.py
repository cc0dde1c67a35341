"""The compiled simulation of Pigeon's and PigeonC's common configurations gives the components' results exactly.

Each case runs the same configuration twice, with the compiled loop (``PIGEON_LEAN=1``) and with the components
(``PIGEON_LEAN=0``), and compares the per-task fingerprint, the engine's events and end time, the message counts
and the counters.
"""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.schedulers.pigeon import _lean
from tests.leanutil import assert_busy_ledger_error, assert_cold_threshold, both_ways
from tests.leanutil import assert_same_run as _same
from tests.tracegen import write_trace

_both = both_ways("PIGEON_LEAN")


@pytest.mark.parametrize(
    ("workers", "options", "seed"),
    [
        (600, {}, 0),
        (100, {}, 1),  # contended: deep short and long queues
        (150, {"masters": 7, "distributors": 3}, 3),
        (120, {"fqw": 2}, 4),
        (120, {"fqw": 0, "fq_rule": "reference"}, 5),
        (90, {"masters": 90, "distributors": 1}, 6),  # one worker per master
    ],
)
def test_goog_prefix_configurations(monkeypatch: pytest.MonkeyPatch, workers: int, options: dict, seed: int) -> None:
    """Constrained jobs over several masters (batches to several masters per job), queues under contention, the
    fair-queuing rules, other shapes of the cluster and seeds."""
    cfg = RunConfig(
        scheduler="pigeonc", trace="sample:GOOG_subtrace", workers=workers, seed=seed, max_jobs=300, options=options
    )
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.message_counts["TaskBatch"] > slow.message_counts["JobArrival"]


@pytest.mark.parametrize(
    ("trace", "cluster", "options"),
    [
        ("sample:YH1_sub", "sample:pigeon_D10M100S10000", {"profile": "iot23"}),
        ("sample:GOOG_subtrace", None, {"profile": "iot23"}),
        ("sample:GOOG_subtrace", None, {"policy": "min-constraints"}),
        ("sample:GOOG_subtrace", None, {"policy": "first", "masters": 5}),
        ("sample:GOOG_subtrace", None, {"weights": "reference"}),
    ],
)
def test_profiles_policies_and_weights(monkeypatch: pytest.MonkeyPatch, trace: str, cluster: str | None,
                                       options: dict) -> None:  # fmt: skip
    """The authors' simulator's profile (reference weights, fewest-constraints choice, cluster cutoff, inclusive
    fair queuing), the other worker choices and the reference weights alone."""
    workers = None if cluster else 150
    cfg = RunConfig(scheduler="pigeonc", trace=trace, cluster=cluster, workers=workers, max_jobs=300, options=options)
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize(
    ("workers", "options"),
    [
        (600, {}),
        (100, {}),
        (150, {"reserve": 0.25, "cutoff": 300.0}),
        (40, {"masters": 10, "reserve": 0.5, "cutoff": 300.0}),  # long tasks only reserved workers can run
        (150, {"policy": "min-constraints", "reserve": 0.2, "masters": 5}),
        (150, {"policy": "first", "reserve": 0.1, "weights": "reference"}),
    ],
)
def test_pigeon_even_spread_and_reserved_workers(monkeypatch: pytest.MonkeyPatch, workers: int, options: dict) -> None:
    """``pigeon``: a job's tasks spread round robin from a drawn master (skipping masters without a suitable worker),
    workers reserved for short tasks, long tasks that only reserved workers can run."""
    cfg = RunConfig(
        scheduler="pigeon", trace="sample:GOOG_subtrace", workers=workers, max_jobs=300, seed=4, options=options
    )
    _same(*_both(monkeypatch, cfg))


def test_contended_queues_are_served(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = RunConfig(scheduler="pigeonc", trace="sample:GOOG_subtrace", workers=80, max_jobs=300, seed=2)
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.counters["pigeon_served_short"] > 0 and slow.counters["pigeon_served_long"] > 0


def test_ties_whole_second_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks of a master ending at the same instant (whole-second durations, no dephasing): several ends in one
    timer, their Finished and TasksDone messages, and the launches of the workers they free."""
    cfg = RunConfig(
        scheduler="pigeonc",
        trace="sample:YH1_sub",
        workers=300,
        max_jobs=300,
        truncate_durations=True,
        dephase=False,
    )
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.message_counts.get("Finished", 0) > 0 and slow.message_counts.get("TasksDone", 0) > 0


@pytest.mark.parametrize(("delay", "report"), [(0.0, 0.0), (0.002, 0.0), (0.0005, 0.001)])
def test_other_network_and_report_delays(monkeypatch: pytest.MonkeyPatch, delay: float, report: float) -> None:
    cfg = RunConfig(
        scheduler="pigeonc",
        trace="sample:GOOG_subtrace",
        workers=200,
        max_jobs=200,
        network_delay=delay,
        worker_report_delay=report,
        seed=2,
    )
    _same(*_both(monkeypatch, cfg))


def test_links_off_the_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """Distributor–master links with a delay of their own (not the engine's lane: batches and the last completions
    travel on the heap)."""
    from megha.sim.engine import DelayModel

    plain = DelayModel.delay

    def delay(self: DelayModel, src: str, dst: str) -> float:
        if {src, dst} == {"distributor", "master"}:
            return 0.0013 if src == "master" else 0.0021
        return plain(self, src, dst)

    monkeypatch.setattr(DelayModel, "delay", delay)
    cfg = RunConfig(scheduler="pigeonc", trace="sample:GOOG_subtrace", workers=150, max_jobs=200, seed=7)
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    rec = slow.recorder
    ok = ~np.isnan(rec.start)
    assert np.allclose(rec.comm[ok], 0.0021 + 0.0005)  # distributor -> master, then the launch


@pytest.mark.parametrize("seed", range(9))
def test_random_traces(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Generated traces (seeded): bursts of jobs at the same instant, durations on a coarse grid so that ends
    coincide, short and long jobs, few workers so that queues form; synthesized constraints or none."""
    rng = np.random.default_rng(seed)
    n_jobs = int(rng.integers(20, 120))
    arrivals = np.sort(np.round(rng.random(n_jobs) * rng.choice([5.0, 40.0]), 1))
    jobs = []
    for a in arrivals.tolist():
        n = int(rng.integers(1, 25))
        grid = rng.choice([0.5, 1.0, 0.001])
        jobs.append((a, (np.maximum(1, rng.integers(1, 40, n)) * grid).round(3).tolist()))
    pigeon = seed % 3 == 2
    cfg = RunConfig(
        scheduler="pigeon" if pigeon else "pigeonc",
        trace=write_trace(jobs),
        workers=int(rng.integers(8, 60)),
        seed=seed,
        constraints=bool(seed % 2),
        dephase=bool(seed % 3),
        options={
            "masters": int(rng.integers(1, 6)),
            "distributors": int(rng.integers(1, 4)),
            "cutoff": float(rng.choice([0.5, 5.0, 20.0])),
            "fqw": int(rng.integers(0, 4)),
            "policy": str(rng.choice(["random", "random", "min-constraints", "first"])),
            "weights": str(rng.choice(["exact", "reference"])),
            **({"reserve": float(rng.choice([0.1, 0.3, 0.6]))} if pigeon else {}),
        },
    )
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize(
    ("sched", "extra"),
    [
        ("pigeon", {"processing_model": "measured"}),
        ("pigeonc", {"processing_model": "measured"}),
        ("pigeonc", {"faults": {"fault": [{"at": 1.0, "kind": "worker", "target": 0.2, "down_for": 30.0}]}}),
    ],
)
def test_not_dispatched_elsewhere(monkeypatch: pytest.MonkeyPatch, sched: str, extra: dict) -> None:
    """Configurations the compiled loop does not model run the components."""
    cfg = RunConfig(scheduler=sched, trace="sample:GOOG_subtrace", workers=300, max_jobs=60, **extra)
    _same(*_both(monkeypatch, cfg), compiled=False)


def test_masters_short_of_uniform_numbers_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A master that uses up the uniform numbers drawn for it makes the loop run again with more, same results."""
    draws = []
    uniforms = _lean._uniforms

    def counted(rngs: list, n: int) -> np.ndarray:
        draws.append(n)
        return uniforms(rngs, n)

    monkeypatch.setattr(_lean, "first_uniforms", lambda n_tasks, n_masters: 1)
    monkeypatch.setattr(_lean, "_BLOCK", 8)  # blocks of any size give the same stream
    monkeypatch.setattr(_lean, "_uniforms", counted)
    cfg = RunConfig(
        scheduler="pigeonc", trace="sample:GOOG_subtrace", workers=600, max_jobs=100, options={"masters": 3}
    )
    _same(*_both(monkeypatch, cfg))
    assert len(draws) > 3 and draws[-1] > draws[0]


def test_cold_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PIGEON_LEAN=0`` never builds the compiled run; unset, a small run uses it only when it is compiled."""
    cfg = RunConfig(scheduler="pigeonc", trace="sample:GOOG_subtrace", workers=200, max_jobs=20)
    assert_cold_threshold(monkeypatch, _lean.SWITCH, cfg)


def test_end_table_against_a_dict() -> None:
    """The compiled loop's table of end groups by (master, end) (linear probing, backward-shift deletion) keeps
    what a dict keeps, through collisions, wrap-around and deletions."""
    from megha.schedulers.pigeon._lean_kernel import end_del, end_get, end_put

    rng = np.random.default_rng(3)
    end_t = np.zeros(64)
    end_m = np.zeros(64, dtype=np.int64)
    end_g = np.full(64, -1, dtype=np.int64)
    ref: dict[tuple[int, float], int] = {}
    pool = [(int(m), e) for m, e in zip(rng.integers(0, 3, 400).tolist(), (rng.integers(0, 40, 200) * 0.25).tolist()
                                          + rng.random(200).tolist(), strict=True)]  # fmt: skip
    for step in range(3000):
        m, e = pool[int(rng.integers(len(pool)))]
        if (m, e) in ref and rng.random() < 0.6:
            end_del(end_t, end_m, end_g, m, e)
            del ref[(m, e)]
        elif (m, e) not in ref and len(ref) < 40:
            end_put(end_t, end_m, end_g, m, e, step)
            ref[(m, e)] = step
        for key in pool[:50]:
            assert end_get(end_t, end_m, end_g, *key) == ref.get(key, -1)
    assert int((end_g >= 0).sum()) == len(ref)


def test_random_pick_is_the_masters_pick() -> None:
    """The compiled loop's pick over one master's words is the masters' compiled pick (same bit, same clearing)."""
    from megha.schedulers.pigeon._kernels import take_random as one_group
    from megha.schedulers.pigeon._kernels import take_random_in as take_random

    rng = np.random.default_rng(11)
    for n_words in (1, 2, 5):
        for _ in range(50):
            avail = rng.integers(0, 1 << 63, n_words, dtype=np.int64).astype(np.uint64)
            static = rng.integers(0, 1 << 63, n_words, dtype=np.int64).astype(np.uint64)
            if rng.random() < 0.2:
                static[:] = 0
            u = float(rng.random())
            pad = np.zeros(3, dtype=np.uint64)
            a1 = avail.copy()
            a2 = np.concatenate([pad, avail])
            s2 = np.concatenate([pad, static])
            assert take_random(a2, s2, 3, 3 + n_words, u) == one_group(a1, static, u)
            assert np.array_equal(a2[3:], a1)


@pytest.mark.parametrize("busy", [True, False])
def test_over_commit_in_the_compiled_loop_raises_the_ledger_error(monkeypatch: pytest.MonkeyPatch, busy: bool) -> None:
    """The compiled loop launches tasks through the ledger's compiled claim: a worker that runs a task already (here
    every worker of a hand-made ledger runs task 10**9 from the start) is the ledger's over-commit error, with the
    launching master's group's name (as ``SimPigeonMaster`` raises it), raised from the compiled run (not a
    fall-back to the components)."""
    cfg = RunConfig(scheduler="pigeonc", trace="sample:GOOG_subtrace", workers=200, max_jobs=20)
    want = (
        r"^pigeonc/workers\d+: worker \d+ over-committed at t=\d+\.\d{6}: task \d+ launched while it runs task 10{9}$"
    )
    assert_busy_ledger_error(monkeypatch, _lean, busy, cfg, want)


def test_over_commit_names_the_group_of_the_worker() -> None:
    """The error names the master's group (its own ledger's owner) and the task the worker runs in the loop's ledger;
    workers are global ids, a group's rows start at its lowest worker."""
    from megha.errors import SimulationError
    from megha.schedulers.common.ledger import WorkerLedger
    from megha.schedulers.pigeon._lean import _raise_over_commit
    from megha.schedulers.pigeon.workers import group_ledger

    led = WorkerLedger("pigeon/workers", 10, slot_array=True)
    led.task[7] = 4
    group = group_ledger("pigeonc/workers1", np.arange(5, 10))
    with pytest.raises(SimulationError, match=r"^pigeonc/workers1: worker 7 over-committed at t=1\.500000: task 9 "):
        _raise_over_commit(led, group, 7, 9, 1.5)
    with pytest.raises(SimulationError, match=r"launched while it runs task 4$"):
        _raise_over_commit(led, group, 7, 9, 1.5)
