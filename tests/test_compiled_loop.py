"""The compiled loops' shared runner scaffolding (:mod:`megha.schedulers.common.compiled_loop`), piece by piece."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from megha.metrics.recorder import TaskRecorder
from megha.model.matching import FastRandom
from megha.schedulers.common import compiled_loop as cl
from megha.schedulers.common.compiled_switch import ALWAYS, CompiledSwitch


def test_absorb_logs_trims_each_log_and_returns_the_rest() -> None:
    """The five recorder logs, each cut to its size, reach ``absorb`` in order; a family's own logs come back."""
    got: list = []
    rec = SimpleNamespace(absorb=lambda *parts: got.extend(parts))
    ids = np.array([3, 1, 2, 9, 9], dtype=np.int64)
    vals = np.array([0.5, 1.5, 2.5, -1.0, -1.0])
    logs = [ids, vals, ids, vals, ids, vals, ids + 10, ids, vals, ids, vals, ids, vals]
    sizes = np.array([3, 2, 1, 0, 3, 2], dtype=np.int64)
    rest_sizes, rest = cl.absorb_logs(rec, sizes, logs)
    assert [len(p) for p in got] == [2, 2, 3, 2, 2]
    assert got[0][0].tolist() == [3, 1, 2] and got[0][1].tolist() == [0.5, 1.5, 2.5]
    assert got[1][0].tolist() == [3, 1] and got[2][2].tolist() == [13]
    assert got[3][0].size == 0 and got[4][1].tolist() == [0.5, 1.5, 2.5]
    assert rest_sizes == [2] and rest[0] is ids and rest[1] is vals


def test_absorb_logs_fills_the_recorder() -> None:
    rec = TaskRecorder(np.zeros(3))
    ids = np.array([0, 2], dtype=np.int64)
    t = np.array([1.0, 2.0, 99.0])
    logs = [ids, t, ids, t, ids, t, ids, ids, t, ids, t]
    cl.absorb_logs(rec, np.array([2, 2, 2, 1, 2], dtype=np.int64), logs)
    assert rec.start[[0, 2]].tolist() == [1.0, 2.0] and np.isnan(rec.start[1])
    assert rec.running == 1


def test_count_messages_counts_given_or_always() -> None:
    counters: dict[type, list[int]] = {}
    port = SimpleNamespace(message_counter=lambda cls: counters.setdefault(cls, [0]))
    cl.count_messages(port, ((int, 3, False), (float, 0, False), (str, 0, True), (bytes, 2, True)))
    assert counters == {int: [3], str: [0], bytes: [2]}


def test_feasible_job_spans() -> None:
    w = SimpleNamespace(job_first_task=np.array([0, 3, 4]), job_num_tasks=np.array([3, 1, 3]))
    feasible = np.array([True, False, True, False, True, True, True])
    f_off, f_n = cl.feasible_job_spans(w, feasible)
    assert f_off.tolist() == [0, 2, 2] and f_n.tolist() == [2, 0, 3]
    ftasks = np.flatnonzero(feasible)
    assert ftasks[f_off[2] : f_off[2] + f_n[2]].tolist() == [4, 5, 6]


def test_uniform_blocks_are_fast_randoms_stream_and_leave_the_generators() -> None:
    rngs = [np.random.default_rng(s) for s in (1, 2)]
    before = [r.bit_generator.state for r in rngs]
    out = cl.uniform_blocks(rngs, 2, 4096)
    assert out.shape == (2, 8192)
    assert [r.bit_generator.state for r in rngs] == before  # drawn from copies
    fr = FastRandom(np.random.default_rng(2))
    want = []
    for _ in range(8192):
        want.append(fr.peek())
        fr.skip()
    assert out[1].tolist() == want
    assert np.array_equal(cl.uniform_blocks(rngs, 16, 8)[0, :100], out[0, :100])  # any block size, one stream


def test_settle_engine() -> None:
    engine = SimpleNamespace(now=0.0, events=5)
    source = SimpleNamespace(pos=0, skipped_jobs=1)
    cl.settle_engine(engine, source, 7.5, 10, 3, 2)
    assert (engine.now, engine.events, source.pos, source.skipped_jobs) == (7.5, 15, 3, 3)


@pytest.mark.parametrize(("allowed", "done"), [(True, True), (True, False), (False, True)])
def test_dispatch_hook(allowed: bool, done: bool) -> None:
    """The hook asks ``allowed`` first, then the switch; it records what the run returned, and nothing when it did
    not try."""
    calls = []
    ctx = SimpleNamespace(feasible=np.ones(3, dtype=bool))
    extras: dict = {}

    def run(engine: object, source: object, stall: float) -> bool:
        calls.append((engine, source, stall))
        return done

    switch = CompiledSwitch("UNUSED_LEAN", "no.such.module")
    hook = cl.dispatch_hook(switch, ALWAYS, ctx, run, extras, lambda: allowed)
    assert hook("e", "s", 9.0) is (allowed and done)
    if allowed:
        assert calls == [("e", "s", 9.0)] and extras == {"compiled_run": done}
    else:
        assert not calls and not extras
    # automatic, small and not compiled (the module does not exist): not tried
    extras.clear()
    assert cl.dispatch_hook(switch, "", ctx, run, extras)("e", "s", 9.0) is False and not extras


def test_fresh_engine() -> None:
    assert cl.fresh_engine(SimpleNamespace(processing=None, _started=False))
    assert not cl.fresh_engine(SimpleNamespace(processing=None, _started=True))
    assert not cl.fresh_engine(SimpleNamespace(processing=object(), _started=False))


def test_plain_configuration() -> None:
    def ctx(**kw: object) -> SimpleNamespace:
        base = {
            "datacenter": SimpleNamespace(capacity=None),
            "faults": False,
            "host": SimpleNamespace(processing=None),
            "recorder": TaskRecorder(np.zeros(1)),
        }
        return SimpleNamespace(**{**base, **kw})

    class Recorder(TaskRecorder):
        pass

    assert cl.plain_configuration(ctx())
    assert not cl.plain_configuration(ctx(datacenter=SimpleNamespace(capacity=np.ones((1, 2)))))
    assert not cl.plain_configuration(ctx(faults=True))
    assert not cl.plain_configuration(ctx(host=SimpleNamespace(processing=object())))
    assert not cl.plain_configuration(ctx(host=SimpleNamespace()))  # a host without the attribute: not plain
    assert not cl.plain_configuration(ctx(recorder=Recorder(np.zeros(1))))
