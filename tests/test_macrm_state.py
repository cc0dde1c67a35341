"""The packed per-node state (macrm/state.py): its compiled handlers against ``NodeManagers._deliver`` and
``NodeManagers._wake`` (news wakes).

At every news delivery (and news wake of a dormant node) of whole simulations, the deployment's state is packed,
the kernel (:func:`k_deliver`, :func:`k_wake_news`) runs on the copy, the Python handler runs on the deployment,
and the copy must equal the deployment's state packed again (every array, bit for bit; the event the kernel asks
for is the one the handler pushed) — or the kernel declined (``FALLBACK``) and left the copy as it was.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.runner import simulate
from megha.schedulers.macrm import state as state_mod
from megha.schedulers.macrm.nodes import NodeManagers
from megha.schedulers.macrm.state import (
    C_ANSWERED,
    C_SENT,
    E_CANCEL_NEWS,
    E_HB_TIMER,
    E_HOLD_TIMER,
    FALLBACK,
    G_D_NT,
    G_NEED,
    G_OUT,
    K_NEWS,
    S_DEAD,
    S_OVER,
    S_REJECT,
    VF_FOUND,
    WAKE_PUSH,
    WAKE_QUIET,
    NodeState,
    k_container_end,
    k_container_start,
    k_deliver,
    k_inquiry,
    k_vf_arm,
    k_wake_news,
    pack,
)
from megha.schedulers.macrm.tracker import ResourceTracker


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal arrays, NaN equal to NaN, -0.0 told from 0.0."""
    if a.dtype.kind == "f":
        return a.tobytes() == b.tobytes() or bool(
            np.all((a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b)))
        )
    return bool(np.array_equal(a, b))


def _wheel_sets(st) -> list[list[set[int]]]:
    """The free wheel's buckets as sets of global nodes (the linked lists' order is not state)."""
    out = []
    for gi in range(st.wheel.shape[0]):
        rows = []
        for b in range(st.wheel.shape[1]):
            s = set()
            x = st.wheel[gi, b]
            while x >= 0:
                s.add(int(x))
                x = st.k[x, 7]  # K_WNEXT
            rows.append(s)
        out.append(rows)
    return out


def _check(st_k, st_p) -> None:
    for name in ("f", "g"):
        assert _same(getattr(st_k, name), getattr(st_p, name)), name
    keep_c = [c for c in range(st_k.c.size) if c not in (C_SENT, C_ANSWERED)]  # (outputs, not state)
    assert np.array_equal(st_k.c[keep_c], st_p.c[keep_c])
    cols = [c for c in range(st_k.gr.shape[1]) if c != 7]  # (the ring's head: where its live entries start)
    assert np.array_equal(st_k.gr[:, cols], st_p.gr[:, cols])
    # k: links differ (order within a bucket); compare every column but the links
    keep = [c for c in range(st_k.k.shape[1]) if c not in (7, 8)]
    assert np.array_equal(st_k.k[:, keep], st_p.k[:, keep])
    assert _wheel_sets(st_k) == _wheel_sets(st_p)
    # undo rings: the live entries in order
    for gi in range(st_k.gr.shape[0]):
        assert _same(_undo_live(st_k, gi), _undo_live(st_p, gi)), gi


def _undo_live(st, gi: int) -> np.ndarray:
    """Tracker ``gi``'s undo ring, its live entries in order."""
    h, n = st.gr[gi, 7], st.gr[gi, 8]
    cap = st.undo.shape[1]
    return np.array([st.undo[gi, (h + q) % cap] for q in range(n)]).reshape(n, st.undo.shape[2])


def _run(cfg: RunConfig) -> tuple[int, int, int]:
    counts = [0, 0, 0]  # kernel while calm, kernel otherwise, fallback

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, NodeManagers) and comp.cad is not None:
                py = comp._deliver_py  # (the handler in Python: the oracle)
                nm = comp

                def wrapped(i: int, now: float, nm=nm, py=py) -> None:
                    cad = nm.cad
                    st = pack(cad)
                    for tr in cad.trackers:
                        assert tr.lo == cad.groups[tr.index].lo
                    before = st.gr.copy()
                    code = k_deliver(*st.args(), nm.lo + i, now)
                    py(i, now)
                    # the Python counters the kernel does not keep (cells) are taken from the packed copy's deltas
                    after = pack(cad)
                    after.c[1:3] = st.c[1:3]
                    if code == FALLBACK:
                        counts[2] += 1
                        assert np.array_equal(st.gr, before)
                        return
                    counts[0 if st.c[3] else 1] += 1
                    _check(st, after)

                comp._deliver = wrapped

    simulate(cfg, instrument=hook)
    return counts[0], counts[1], counts[2]


@pytest.mark.parametrize(("workers", "jobs", "metric", "switch"), [(48, 30, "max", 0.9), (48, 60, "mean", 0.9)])
def test_k_deliver_matches_python(workers: int, jobs: int, metric: str, switch: float) -> None:
    cfg = RunConfig(
        scheduler="macrm",
        trace="sample:GOOG_subtrace",
        workers=workers,
        resources=True,
        max_jobs=jobs,
        seed=0,
        options={"load_metric": metric, "switch_load": switch},
    )
    calm, other, fell_back = _run(cfg)
    assert calm > 100, (calm, other, fell_back)
    if metric == "mean":  # overloaded: calm spells end, deliveries outside them are covered too
        assert other > 100, (calm, other, fell_back)


def _wired_run(cfg: RunConfig, kernels: bool) -> tuple[str, dict, dict]:
    """One run with the compiled handlers on or off: its fingerprint, node-manager and tracker counters."""
    groups: list = []

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, NodeManagers):
                comp.kernels = kernels
                groups.append(comp)

    res = simulate(cfg, instrument=hook)
    nm_stats: dict = {}
    tr_stats: dict = {}
    for nm in groups:
        for key, v in nm.stats.items():
            nm_stats[key] = nm_stats.get(key, 0) + v
        if nm.cad is not None:
            for key, v in nm.cad.trackers[nm.group].stats.items():
                tr_stats[key] = tr_stats.get(key, 0) + v
    return fingerprint(res), nm_stats, tr_stats


@pytest.mark.parametrize(("workers", "jobs", "ring"), [(120, 40, 4096), (48, 40, 4096), (120, 40, 4)])
def test_wired_handlers_change_nothing(workers: int, jobs: int, ring: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deployment with its compiled handlers gives the run the Python handlers give: per-task outputs,
    message counts and every counter (also with undo rings of 4 entries, which fill and grow)."""
    monkeypatch.setattr(state_mod, "UNDO_CAP", ring)
    cfg = RunConfig(
        scheduler="macrm", trace="sample:GOOG_subtrace", workers=workers, resources=True, max_jobs=jobs, seed=0
    )
    assert _wired_run(cfg, True) == _wired_run(cfg, False)


def test_undo_ring_grows_in_order() -> None:
    """NodeState.grow_undo: twice the capacity, every ring's live entries kept in order from the start."""
    st = NodeState(3, 2, 2, 1)
    cap = st.undo.shape[1]
    for gi, (head, n) in enumerate([(cap - 3, cap), (5, 7)]):
        st.gr[gi, 7], st.gr[gi, 8] = head, n  # GR_UHEAD, GR_ULEN
        for q in range(n):
            st.undo[gi, (head + q) % cap, 0] = 100 * gi + q
    before = [_undo_live(st, gi).copy() for gi in range(2)]
    st.grow_undo()
    assert st.undo.shape[1] == 2 * cap and st.kargs[-1] is st.undo
    for gi in range(2):
        assert st.gr[gi, 7] == 0
        assert _same(_undo_live(st, gi), before[gi])


def _run_wake(cfg: RunConfig) -> tuple[int, int, int]:
    counts = [0, 0, 0]  # quiet, pushed, fallback

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, NodeManagers) and comp.cad is not None:
                py = comp._wake_py  # (the handler in Python: the oracle)
                nm = comp
                comp.kernels = False  # (container starts and ends wake nodes through _wake, not their kernels)

                def wrapped(i: int, now: float, news: bool = False, nm=nm, py=py, engine=engine) -> None:
                    if not news or not nm.dormant[i]:
                        py(i, now, news)
                        return
                    st = pack(nm.cad)
                    before = [a.copy() for a in st.args()]
                    code = k_wake_news(*st.args(), nm.lo + i, now)
                    py(i, now, news)
                    after = pack(nm.cad)
                    after.c[1:3] = st.c[1:3]  # (the engine's message counts: checked as deltas below)
                    if code == FALLBACK:
                        counts[2] += 1
                        for a, b in zip(before, st.args(), strict=True):
                            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                        return
                    if code == WAKE_QUIET:
                        counts[0] += 1
                    else:
                        assert code == WAKE_PUSH
                        counts[1] += 1
                        seq = nm.news[i]
                        assert nm._next_tick == st.g[G_OUT]
                        at = [e[0] for e in engine._heap if e[1] == seq]
                        assert at == [st.g[G_OUT] + st.g[G_D_NT]]
                        st.k[nm.lo + i, K_NEWS] = seq
                    st.g[G_OUT] = after.g[G_OUT]
                    _check(st, after)

                comp._wake = wrapped

    simulate(cfg, instrument=hook)
    return counts[0], counts[1], counts[2]


@pytest.mark.parametrize(("workers", "jobs"), [(48, 30)])
def test_k_wake_news_matches_python(workers: int, jobs: int) -> None:
    cfg = RunConfig(
        scheduler="macrm", trace="sample:GOOG_subtrace", workers=workers, resources=True, max_jobs=jobs, seed=0
    )
    quiet, pushed, fell_back = _run_wake(cfg)
    assert pushed > 100 and quiet > 0, (quiet, pushed, fell_back)


def _run_end(cfg: RunConfig) -> tuple[int, int, int]:
    counts = [0, 0, 0]  # no wake, pushed, fallback

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, NodeManagers) and comp.cad is not None:
                py = comp._ends_at
                nm = comp

                def wrapped(key: float, now: float, nm=nm, py=py, engine=engine) -> None:
                    tasks = nm._ends.get(key, ())
                    e = nm.containers.get(tasks[0]) if len(tasks) == 1 else None
                    if e is None or e[1] != key or e[7] or nm.track_users:
                        py(key, now)
                        return
                    i = e[0]
                    st = pack(nm.cad)
                    before = [a.copy() for a in st.args()]
                    dem = slice(G_NEED + 3 * st.n_res, G_NEED + 4 * st.n_res)
                    st.g[dem] = e[6]
                    before[2][dem] = e[6]
                    wired, nm.kernels = nm.kernels, False  # (the oracle: the Python handlers)
                    code = k_container_end(*st.args(), nm.lo + i, now)
                    py(key, now)
                    nm.kernels = wired
                    after = pack(nm.cad)
                    after.c[1:3] = st.c[1:3]
                    after.g[dem] = st.g[dem]
                    if code == FALLBACK:
                        counts[2] += 1
                        for a, b in zip(before, st.args(), strict=True):
                            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                        return
                    if code == WAKE_PUSH:
                        counts[1] += 1
                        seq = nm.news[i]
                        at = [e[0] for e in engine._heap if e[1] == seq]
                        assert at == [st.g[G_OUT] + st.g[G_D_NT]]
                        st.k[nm.lo + i, K_NEWS] = seq
                    else:
                        counts[0] += 1
                    st.g[G_OUT] = after.g[G_OUT]
                    _check(st, after)

                comp._ends_at = wrapped

    simulate(cfg, instrument=hook)
    return counts[0], counts[1], counts[2]


def test_k_container_end_matches_python() -> None:
    cfg = RunConfig(scheduler="macrm", trace="sample:GOOG_subtrace", workers=48, resources=True, max_jobs=30, seed=0)
    quiet, pushed, fell_back = _run_end(cfg)
    assert pushed > 100 and quiet > 0, (quiet, pushed, fell_back)


def _run_start(cfg: RunConfig) -> tuple[int, int, int]:
    counts = [0, 0, 0]  # containers started, rejected, messages that fell back

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, NodeManagers) and comp.cad is not None:
                py = comp._start
                nm = comp

                def wrapped(c, now: float, from_arbitrator: bool, nm=nm, py=py, engine=engine) -> None:
                    st = pack(nm.cad)
                    running = set(nm.containers)
                    pushes = []
                    fell_back = False
                    started = rejected = 0
                    for q, node in enumerate(c.nodes):
                        t = c.tasks[q]
                        fenced = t >= 0 and (nm.job_attempt.get(c.jobs[q], 0) > c.attempts[q] or t in running)
                        st.g[G_NEED + 3 * st.n_res : G_NEED + 4 * st.n_res] = c.demands[q]
                        code = k_container_start(*st.args(), node, c.seqs[q], fenced, now)
                        if code == FALLBACK:
                            fell_back = True
                            break
                        assert not code & S_OVER
                        if code & WAKE_PUSH:
                            pushes.append((node - nm.lo, st.g[G_OUT]))
                        if code & (S_DEAD | S_REJECT):
                            rejected += 1
                        elif t >= 0:
                            running.add(t)
                            started += 1
                    wired, nm.kernels = nm.kernels, False  # (the oracle: the Python handlers)
                    py(c, now, from_arbitrator)
                    nm.kernels = wired
                    if fell_back:
                        counts[2] += 1
                        return
                    counts[0] += started
                    counts[1] += rejected
                    after = pack(nm.cad)
                    after.c[1:3] = st.c[1:3]
                    dem = slice(G_NEED + 3 * st.n_res, G_NEED + 4 * st.n_res)
                    after.g[dem] = st.g[dem]
                    for i, tick in pushes:
                        seq = nm.news[i]
                        at = [e[0] for e in engine._heap if e[1] == seq]
                        assert at == [tick + st.g[G_D_NT]]
                        st.k[nm.lo + i, K_NEWS] = seq
                    st.g[G_OUT] = after.g[G_OUT]
                    _check(st, after)

                comp._start = wrapped

    simulate(cfg, instrument=hook)
    return counts[0], counts[1], counts[2]


def test_k_container_start_matches_python() -> None:
    cfg = RunConfig(scheduler="macrm", trace="sample:GOOG_subtrace", workers=48, resources=True, max_jobs=30, seed=0)
    started, rejected, fell_back = _run_start(cfg)
    assert started > 100, (started, rejected, fell_back)


def _run_inquiry(cfg: RunConfig) -> tuple[int, int, int]:
    counts = [0, 0, 0]  # node inquiries covered, answered among them, messages left (partly) to Python
    tokens: dict = {}

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, NodeManagers) and comp.cad is not None:
                py = comp._inquiry
                nm = comp

                def wrapped(msg, now: float, nm=nm, py=py, engine=engine) -> None:
                    if not nm.hb_blocks or nm.track_users:
                        py(msg, now)
                        return
                    st = pack(nm.cad, tokens)
                    xs = np.array(msg.nodes, dtype=np.int64)
                    out = np.zeros(xs.size, dtype=np.int64)
                    cnt = np.zeros(6, dtype=np.int64)
                    ev = np.zeros((2 * xs.size + 1, 3))
                    stats0 = dict(nm.stats)
                    token = tokens.setdefault(msg.token, len(tokens))
                    n_ev = k_inquiry(*st.args(), xs, msg.need - 1e-9, token, now, out, cnt, ev)
                    nm.kernels = False  # (the handler in Python: the oracle)
                    py(msg, now)
                    nm.kernels = True
                    if n_ev < 0:
                        counts[2] += 1
                        return
                    counts[0] += xs.size
                    counts[1] += int(cnt[4])
                    st_ = nm.stats
                    assert st_["ignored_waiting"] - stats0["ignored_waiting"] == cnt[0]
                    assert st_["ignored_pending"] - stats0["ignored_pending"] == cnt[1]
                    assert st_["ignored_full"] - stats0["ignored_full"] == cnt[2]
                    assert st_["hb_reply_timeouts"] - stats0["hb_reply_timeouts"] == cnt[3]
                    assert st_["answered"] - stats0["answered"] == cnt[4]
                    after = pack(nm.cad, tokens)
                    after.c[1:3] = st.c[1:3]
                    times = {e[1]: e[0] for e in engine._heap}
                    for kind, pos, t in ev[:n_ev]:
                        i = msg.nodes[int(pos)] - nm.lo
                        if kind == E_HB_TIMER:
                            assert times[nm.hb_timer[i]] == t
                        elif kind == E_HOLD_TIMER:
                            assert times[nm.hold[i][0]] == t
                        else:
                            assert kind == E_CANCEL_NEWS and int(t) in engine._cancelled
                    _check(st, after)

                comp._inquiry = wrapped

    simulate(cfg, instrument=hook)
    return counts[0], counts[1], counts[2]


def test_k_inquiry_matches_python() -> None:
    cfg = RunConfig(scheduler="macrm", trace="sample:GOOG_subtrace", workers=48, resources=True, max_jobs=30, seed=0)
    covered, answered, left = _run_inquiry(cfg)
    assert answered > 100, (covered, answered, left)


def test_last_le_pow2_matches_period() -> None:
    from megha.schedulers.macrm.period import Period
    from megha.schedulers.macrm.state import _last_le_pow2

    rng = np.random.default_rng(0)
    for h in (1.0, 0.5, 2.0, 0.25, 8.0):
        per = Period(h)
        starts = [float(rng.random() * 10 ** rng.uniform(-3, 6)) for _ in range(3000)]
        starts += [math.ldexp(1.0, e) for e in range(-2, 22)]  # binade edges
        starts += [math.nextafter(math.ldexp(1.0, e), 0.0) for e in range(22)]
        for t0 in starts:
            at = t0 + float(rng.random() * 10 ** rng.uniform(-2, 6.5))
            for a in (at, per.advance(t0, int(rng.integers(0, 50))), t0):
                assert _last_le_pow2(t0, a, h) == (True, *per.last_le(t0, a)), (h, t0, a)


def _run_vf_arm(cfg: RunConfig) -> tuple[int, int]:
    counts = [0, 0]  # scans compared, of which found a node

    def hook(engine) -> None:
        for comp in list(engine.components.values()):
            if isinstance(comp, ResourceTracker) and comp.cad is not None:
                py = comp._vf_arm
                tr = comp

                def wrapped(after: float, after_rank: int, tr=tr, py=py) -> None:
                    nm = tr.cad.groups[tr.index]
                    st = pack(tr.cad)
                    out = np.zeros(4)
                    d = tr.cad.d_nt
                    code = k_vf_arm(*st.args(), tr.index, after, after_rank, after - d - 8 * math.ulp(after), d, out)
                    nm.kernels = False  # (the scan in Python, over the packed wheel's buckets: the oracle)
                    py(after, after_rank)
                    nm.kernels = True
                    assert code != FALLBACK
                    counts[0] += 1
                    if code == VF_FOUND:
                        counts[1] += 1
                        assert tr._vf is not None and tuple(out.tolist()) == tr._vf[:4]
                    else:
                        assert tr._vf is None

                comp._vf_arm = wrapped

    simulate(cfg, instrument=hook)
    return counts[0], counts[1]


def test_k_vf_arm_matches_python() -> None:
    """The compiled scan of the packed free wheel arms the virtual heartbeat the Python scan arms."""
    cfg = RunConfig(scheduler="macrm", trace="sample:GOOG_subtrace", workers=120, resources=True, max_jobs=40, seed=0)
    scans, found = _run_vf_arm(cfg)
    assert found > 50, (scans, found)
