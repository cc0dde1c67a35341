"""The compiled simulation of Sparrow's common configuration gives the components' results exactly.

Each case runs the same configuration twice, with the compiled loop (``SPARROW_LEAN=1``) and with the components
(``SPARROW_LEAN=0``), and compares the per-task fingerprint, the engine's events and end time, the message counts
and the counters.
"""

from __future__ import annotations

import pytest

from megha.config import RunConfig
from megha.schedulers.sparrow import _lean
from tests.leanutil import assert_busy_ledger_error, assert_cold_threshold, both_ways
from tests.leanutil import assert_same_run as _same

_both = both_ways("SPARROW_LEAN")


@pytest.mark.parametrize(("gms", "seed"), [(1, 0), (3, 5), (10, 0), (7, 11)])
def test_goog_prefix_schedulers_and_seeds(monkeypatch: pytest.MonkeyPatch, gms: int, seed: int) -> None:
    """Constrained jobs (several task groups, probes on eligible workers), any number of schedulers, other seeds."""
    cfg = RunConfig(scheduler="sparrow", trace="sample:GOOG_subtrace", workers=600, gms=gms, seed=seed, max_jobs=400)
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.message_counts.get("GetTask", 0) > 0  # batched requests answered by TaskReply


@pytest.mark.parametrize("ratio", [1.0, 1.5, 3.0])
def test_probe_ratios(monkeypatch: pytest.MonkeyPatch, ratio: float) -> None:
    cfg = RunConfig(
        scheduler="sparrow", trace="sample:GOOG_subtrace", workers=400, max_jobs=300, options={"probe_ratio": ratio}
    )
    _same(*_both(monkeypatch, cfg))


def test_no_constraints_heavy_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unconstrained jobs on few workers under load: deep queues, skipped no-ops, wake-ups."""
    cfg = RunConfig(
        scheduler="sparrow",
        trace="sample:synthetic_FB_sub_2000jobs",
        workers=150,
        constraints=False,
        max_jobs=400,
        load_scale=4.0,
    )
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.counters["sparrow_max_worker_queue"] > 1


def test_ties_whole_second_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks ending at the same instant (whole-second durations, no dephasing): several ends in one timer, their
    Finished messages and the requests of the workers they free."""
    cfg = RunConfig(
        scheduler="sparrow",
        trace="sample:YH1_sub",
        workers=300,
        max_jobs=300,
        truncate_durations=True,
        dephase=False,
    )
    fast, slow = _both(monkeypatch, cfg)
    _same(fast, slow)
    assert slow.message_counts.get("Finished", 0) > 0


@pytest.mark.parametrize("delay", [0.0, 0.002])
def test_other_network_delays(monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
    cfg = RunConfig(
        scheduler="sparrow", trace="sample:GOOG_subtrace", workers=500, max_jobs=200, network_delay=delay, seed=2
    )
    _same(*_both(monkeypatch, cfg))


@pytest.mark.parametrize(
    "extra",
    [
        {"resources": True},
        {"processing_model": "measured"},
        {"faults": {"fault": [{"at": 1.0, "kind": "worker", "target": 0.2, "down_for": 30.0}]}},
    ],
)
def test_not_dispatched_elsewhere(monkeypatch: pytest.MonkeyPatch, extra: dict) -> None:
    """Configurations the compiled loop does not model run the components."""
    cfg = RunConfig(scheduler="sparrow", trace="sample:GOOG_subtrace", workers=300, max_jobs=60, **extra)
    _same(*_both(monkeypatch, cfg), compiled=False)


def test_cold_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``SPARROW_LEAN=0`` never builds the compiled run; unset, a small run uses it only when it is compiled."""
    cfg = RunConfig(scheduler="sparrow", trace="sample:GOOG_subtrace", workers=200, max_jobs=20)
    assert_cold_threshold(monkeypatch, _lean.SWITCH, cfg)


def test_end_table_against_a_dict() -> None:
    """The compiled loop's table of end groups (linear probing, backward-shift deletion) keeps what a dict keeps,
    through collisions, wrap-around and deletions."""
    import numpy as np

    from megha.schedulers.sparrow._lean_kernel import _end_del, _end_get, _end_put

    rng = np.random.default_rng(3)
    end_t = np.zeros(64)
    end_g = np.full(64, -1, dtype=np.int64)
    ref: dict[float, int] = {}
    pool = (rng.integers(0, 40, 200) * 0.25).tolist() + rng.random(200).tolist()  # repeated and distinct instants
    for step in range(3000):
        e = pool[int(rng.integers(len(pool)))]
        if e in ref and rng.random() < 0.6:
            _end_del(end_t, end_g, e)
            del ref[e]
        elif e not in ref and len(ref) < 40:
            _end_put(end_t, end_g, e, step)
            ref[e] = step
        for key in pool[:50]:
            assert _end_get(end_t, end_g, key) == ref.get(key, -1)
    assert int((end_g >= 0).sum()) == len(ref)


def test_eligible_bit_sets_against_numpy() -> None:
    """A mask's eligible workers from the per-constraint bit sets: the count and the increasing list NumPy gives."""
    import numpy as np

    from megha.schedulers.sparrow._lean_kernel import _eligible_words, _list_words, _worker_bits

    rng = np.random.default_rng(5)
    for n_w in (1, 63, 64, 65, 1000):
        wm = (rng.integers(0, 1 << 32, n_w, dtype=np.uint64) & rng.integers(0, 1 << 32, n_w, dtype=np.uint64)).astype(
            np.int64
        )
        bits = _worker_bits(wm, 32)
        words = np.empty((n_w + 63) // 64, dtype=np.uint64)
        for m in [0, 1, 1 << 31, *rng.integers(0, 1 << 32, 20).tolist(), int(wm[0]), int(wm[-1])]:
            want = np.flatnonzero((m & ~wm) & 0xFFFFFFFF == 0)
            assert _eligible_words(m, bits, n_w, words) == want.size
            out = np.full(want.size + 1, -7, dtype=np.int64)
            _list_words(words, out, 1)
            assert out[1:].tolist() == want.tolist()


@pytest.mark.parametrize("busy", [True, False])
def test_over_commit_in_the_compiled_loop_raises_the_ledger_error(monkeypatch: pytest.MonkeyPatch, busy: bool) -> None:
    """The compiled loop starts tasks through the ledger's compiled claim: a worker that runs a task already (here
    every worker of a hand-made ledger runs task 10**9 from the start) is the ledger's over-commit error, with the
    node monitors' name, raised from the compiled run (not a fall-back to the components)."""
    cfg = RunConfig(scheduler="sparrow", trace="sample:GOOG_subtrace", workers=200, max_jobs=20)
    want = r"^sparrow/monitors: worker \d+ over-committed at t=\d+\.\d{6}: task \d+ launched while it runs task 10{9}$"
    assert_busy_ledger_error(monkeypatch, _lean, busy, cfg, want)


def test_over_commit_text_of_a_worker_without_request() -> None:
    """A task sent to a free worker that holds no request: the components' second over-commit text."""
    from megha.errors import SimulationError
    from megha.schedulers.common.ledger import WorkerLedger
    from megha.schedulers.sparrow._lean import _raise_over_commit

    led = WorkerLedger("sparrow/monitors", 3, slot_array=True)
    with pytest.raises(SimulationError, match=r"worker 2 over-committed at t=1\.500000: task 7 sent while it holds no"):
        _raise_over_commit(led, 2, 7, 1.5)
    led.task[2] = 4
    with pytest.raises(SimulationError, match=r"worker 2 over-committed at t=1\.500000: task 7 launched while it runs"):
        _raise_over_commit(led, 2, 7, 1.5)
