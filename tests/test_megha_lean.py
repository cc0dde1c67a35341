"""The compiled simulation of Megha's lean configuration gives the components' results exactly.

Each case runs the same configuration twice, with the compiled core (the default where the configuration allows
it) and with the components (``MEGHA_LEAN=0``), and compares the per-task fingerprint, the engine's events and
end time, the message counts and the counters.
"""

from __future__ import annotations

import pytest

from megha.config import RunConfig
from megha.schedulers.megha import _lean
from tests.leanutil import assert_busy_ledger_error, assert_cold_threshold, both_ways
from tests.leanutil import assert_same_run as _same

_both = both_ways("MEGHA_LEAN")


@pytest.mark.parametrize("max_jobs", [40, 400])
def test_central_goog_prefix(monkeypatch: pytest.MonkeyPatch, max_jobs: int) -> None:
    cfg = RunConfig(scheduler="megha-central", trace="sample:GOOG_subtrace", workers=2000, max_jobs=max_jobs)
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize("options", [{}, {"batch_size": 3}, {"heartbeat_phase": "aligned", "heartbeat": 1.0}])
def test_one_by_one_options(monkeypatch: pytest.MonkeyPatch, options: dict) -> None:
    """``megha`` with 1 GM x 1 LM, small batches (several requests per step) and an aligned heartbeat grid."""
    cfg = RunConfig(
        scheduler="megha", trace="sample:GOOG_subtrace", workers=500, gms=1, lms=1, max_jobs=150, options=options
    )
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize(
    ("gms", "lms", "options"),
    [
        (5, 5, {}),
        (3, 4, {"batch_size": 2}),
        (2, 3, {"repartition": False}),
        (4, 2, {"heartbeat_phase": "aligned", "heartbeat": 2.0}),
    ],
)
def test_many_gms_and_lms(monkeypatch: pytest.MonkeyPatch, gms: int, lms: int, options: dict) -> None:
    """Heartbeat deltas (shared and per GM), rejected launches answered and retried, repartition."""
    cfg = RunConfig(
        scheduler="megha", trace="sample:GOOG_subtrace", workers=600, gms=gms, lms=lms, max_jobs=200, options=options
    )
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.counters.get("inconsistencies", 0) > 0  # the rejection path ran
    assert slow.message_counts.get("StateDelta", 0) > 0


def test_other_delays_seed_and_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Link delays other than the default (the engine's heap instead of its FIFO lane), another seed, jobs routed
    by task count, one mapping per request."""
    cfg = RunConfig(
        scheduler="megha",
        trace="sample:synthetic_FB_sub_2000jobs",
        workers=400,
        gms=3,
        lms=2,
        max_jobs=150,
        seed=7,
        network_delay=0.002,
        worker_report_delay=0.0001,
        options={"route": "tasks-mod-g", "batch_size": 1, "heartbeat": 30.0},
    )
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize("extra", [{"options": {"profile": "iot23"}}, {"network_delay": 0.0}])
def test_not_dispatched_elsewhere(monkeypatch: pytest.MonkeyPatch, extra: dict) -> None:
    """Configurations the compiled core does not model (another profile; zero-delay messages) run the components."""
    cfg = RunConfig(scheduler="megha-central", trace="sample:GOOG_subtrace", workers=500, max_jobs=60, **extra)
    _same(*_both(monkeypatch, cfg), compiled=False)


def test_recorder_absorb_only_at_start() -> None:
    import numpy as np

    from megha.metrics.recorder import TaskRecorder

    rec = TaskRecorder(np.zeros(3))
    ids = np.array([0, 1, 0], dtype=np.int64)
    t = np.array([1.0, 2.0, 3.0])
    e = np.zeros(0, dtype=np.int64)
    rec.absorb((ids, t), (ids, t), (ids, t, ids), (e, np.zeros(0)), (e, np.zeros(0)))
    assert rec.scheduled[0] == 3.0 and rec.launches.tolist() == [2, 1, 0] and rec.comm.tolist() == [4.0, 2.0, 0.0]
    assert rec.running == 3
    with pytest.raises(RuntimeError):
        rec.absorb((ids, t), (ids, t), (ids, t, ids), (e, np.zeros(0)), (e, np.zeros(0)))


@pytest.mark.parametrize("busy", [True, False])
def test_over_commit_in_the_compiled_loop_raises_the_ledger_error(monkeypatch: pytest.MonkeyPatch, busy: bool) -> None:
    """The compiled loop starts tasks through the ledger's compiled claim: a worker that runs a task already (here
    every worker of a hand-made ledger runs task 10**9 from the start; the LMs' own records still say free) is the
    ledger's over-commit error, named by the worker's LM's pool as SimLocalMaster's, raised from the compiled run
    (not a fall-back to the components)."""
    cfg = RunConfig(scheduler="megha", trace="sample:GOOG_subtrace", workers=300, gms=2, lms=3, max_jobs=20)
    want = r"^\S+/workers[0-2]: worker \d+ over-committed at t=\d+\.\d{6}: task \d+ launched while it runs task 10{9}$"
    assert_busy_ledger_error(monkeypatch, _lean, busy, cfg, want)


def test_event_queue_order_and_reuse() -> None:
    """The compiled loop's event queue (``_post``, and ``_pop`` as the loop takes an event) hands out events as a
    heap of (time, posting order) does, each with its message's fields, reusing freed rows of the message table."""
    import heapq

    import numpy as np

    from megha.schedulers.megha._lean_kernel import QI_FREE, QI_ROW, QI_WIDTH, _pop, _post

    rng = np.random.default_rng(1)
    cap = 400
    ht, qi = np.empty(cap), np.zeros((cap, QI_WIDTH), dtype=np.int64)
    hn = n_mfree = n_msg = seq = 0
    ref: list[tuple[float, int]] = []  # (time, posting order): the engine's order
    posted = 0

    def take() -> tuple[float, int]:
        nonlocal hn, n_mfree
        t, row = float(ht[0]), int(qi[0, QI_ROW])
        hn = _pop(ht, qi, hn)
        qi[n_mfree, QI_FREE] = row
        n_mfree += 1
        return t, row

    for _ in range(60):
        for _ in range(int(rng.integers(0, 40))):
            t = float(rng.integers(0, 20))  # many ties
            assert n_mfree or n_msg < cap  # the loop asks for room before it posts (NEED_ROOM)
            hn, n_mfree, n_msg, seq = _post(ht, qi, hn, n_mfree, n_msg, seq, t, 3, 1, 2, posted, posted + 1, 0, 0, 0)
            heapq.heappush(ref, (t, posted))
            posted += 1
        for _ in range(int(rng.integers(0, 40))):
            if not ref:
                assert hn == 0
                break
            t, row = take()
            assert (t, int(qi[row, 3])) == heapq.heappop(ref)
            assert qi[row, 0] == 3 and qi[row, 4] == qi[row, 3] + 1
    while ref:
        t, row = take()
        assert (t, int(qi[row, 3])) == heapq.heappop(ref)
    assert hn == 0 and seq == posted
    assert n_mfree == n_msg and n_msg < posted  # freed rows were reused


@pytest.mark.parametrize("category", ["R_DEC", "R_EVENTS", "R_PAYLOAD", "R_LOG", "R_SCRATCH", "R_NODES", "R_BOOK"])
def test_full_arrays_run_again_with_more_room(monkeypatch: pytest.MonkeyPatch, category: str) -> None:
    """An array of the compiled loop allocated too small for the run stops it (``NEED_ROOM``); it runs again from
    the start with more room and gives the components' results."""
    from megha.schedulers.megha import _lean_kernel as K

    first = _lean._capacities
    calls = []

    def small(*args: object) -> object:
        caps = first(*args)
        caps[getattr(K, category)] = 1
        return caps

    real = K.run_lean

    def counted(*args: object) -> int:
        status = real(*args)
        calls.append(status)
        return status

    monkeypatch.setattr(_lean, "_capacities", small)
    monkeypatch.setattr(K, "run_lean", counted)
    cfg = RunConfig(scheduler="megha", trace="sample:GOOG_subtrace", workers=600, gms=3, lms=4, max_jobs=120)
    _same(*_both(monkeypatch, cfg))
    assert calls[0] == K.NEED_ROOM and calls[-1] == K.OK


def test_cold_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MEGHA_LEAN=0`` never builds the compiled run; unset, a small run uses it only when it is compiled."""
    cfg = RunConfig(scheduler="megha", trace="sample:GOOG_subtrace", workers=200, gms=2, lms=2, max_jobs=20)
    assert_cold_threshold(monkeypatch, _lean.SWITCH, cfg)
