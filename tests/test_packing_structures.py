"""Index structures of the packing schedulers, checked against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.errors import InputError
from megha.schedulers.packing.multires import VectorJobs, VectorServers, max_reduce
from megha.schedulers.packing.structures import (
    NEG,
    UNIT,
    ArrivalOrder,
    Constraints,
    LineServers,
    MaskedJobs,
    MaxTree,
    SizeQueue,
    quantize,
    quantize_array,
)


def test_quantize_exact_sums():
    assert quantize(0.4) + quantize(0.6) == UNIT
    assert quantize(0.2) * 5 == UNIT
    assert quantize(1.0) == UNIT
    assert quantize(0.0) == 1  # a zero request still occupies one unit
    assert quantize(1 / 3) * 3 >= UNIT  # rounded up: never over-commits
    with pytest.raises(InputError, match="more than a whole server"):
        quantize_array(np.array([0.5, 1.2]))
    with pytest.raises(InputError, match=">= 0"):
        quantize_array(np.array([-0.1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 20), min_size=1, max_size=70), st.data())
def test_maxtree_find_first(vals, data):
    t = MaxTree(vals)
    for _ in range(5):
        i = data.draw(st.integers(0, len(vals) - 1))
        v = data.draw(st.integers(-5, 20))
        vals[i] = v
        t.set(i, v)
    assert t.max() == max(vals)
    for x in range(-6, 22, 3):
        for lo in range(0, len(vals) + 1, 7):
            want = next((k for k in range(lo, len(vals)) if vals[k] >= x), -1)
            assert t.find_first(x, lo) == want


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(1, UNIT // 3)), max_size=30),
    st.integers(1, UNIT),
)
def test_line_servers_best_and_first_fit(n, adds, x):
    srv = LineServers(n, by_residual=True, by_index=True)
    used = [0] * n
    for s, a in adds:
        s %= n
        if used[s] + a <= UNIT:
            srv.add(s, a)
            used[s] += a
    res = [UNIT - u for u in used]
    feas = [s for s in range(n) if res[s] >= x]
    assert srv.best_fit(x) == (min(feas, key=lambda s: (res[s], s)) if feas else -1)
    assert srv.first_fit(x) == (feas[0] if feas else -1)
    assert srv.max_room() == max(res)
    odd = [s for s in feas if s % 2]
    assert srv.best_fit(x, accept=lambda s: s % 2 == 1) == (min(odd, key=lambda s: (res[s], s)) if odd else -1)
    assert srv.first_fit(x, accept=lambda s: s % 2 == 1) == (odd[0] if odd else -1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=40), st.integers(0, 60))
def test_size_queue_largest_fitting_oldest_first(sizes, room):
    q = SizeQueue()
    for j, x in enumerate(sizes):
        q.add(j, x)
    fit = [j for j, x in enumerate(sizes) if x <= room]
    want = min(fit, key=lambda j: (-sizes[j], j)) if fit else -1
    assert q.best_for(room) == want
    assert q.min_size() == min(sizes)
    q.remove(0, sizes[0])
    assert len(q) == len(sizes) - 1


def test_arrival_order_survives_compaction():
    o = ArrivalOrder(capacity=4)
    for j in range(3000):
        o.append(j, 100 + j % 7)
        if j % 3:
            o.remove(j)
    assert len(o) == 1000
    p = o.first_fitting(100, 0)
    assert o.job_at(p) == 0
    p = o.first_fitting(103, 1)
    assert o.job_at(p) == 3  # size 103 ≤ 103
    assert o.first_fitting(50, 0) == -1
    assert NEG < 0


def test_masked_jobs_respects_masks_and_types():
    m = MaskedJobs(capacity=2)
    m.add(0, 50, 0b01, 0)
    m.add(1, 80, 0b10, 1)
    m.add(2, 80, 0b00, 1)
    m.add(3, 90, 0b11, 0)
    inv_only_bit0 = ~0b01 & 0xFFFFFFFF
    assert m.best(100, inv_only_bit0) == 2  # 80, oldest compatible (job 1 needs bit 1)
    assert m.best(100, 0) == 3
    assert m.best(100, 0, typ=1) == 1
    m.remove(3)
    assert m.fitting_any([(60, inv_only_bit0)]) == [0]
    c = Constraints([0b01, 0b11])
    c.set([7], [0b10])
    assert not c(7, 0) and c(7, 1) and c(8, 0)


def test_vector_structures_alignment():
    srv = VectorServers(3, 2)
    srv.add(0, (UNIT // 2, 0))  # cpu-heavy
    srv.add(1, (0, UNIT // 2))  # mem-heavy
    # a cpu-heavy job aligns with server 0
    assert srv.best_fit((UNIT // 4, UNIT // 10)) == 0
    assert srv.best_fit((UNIT // 10, UNIT // 4)) == 1
    assert srv.best_fit((UNIT, UNIT)) == 2
    assert srv.first_fit((UNIT // 2 + 1, 1)) == 1
    q = VectorJobs(2, capacity=1)
    q.add(0, (UNIT // 4, 0))
    q.add(1, (0, UNIT // 4))
    q.add(2, (UNIT // 8, UNIT // 8))
    assert q.best_for(np.array([UNIT, UNIT]), used=np.array([UNIT // 2, 0])) == 0
    assert q.best_for(np.array([UNIT, UNIT]), used=np.array([0, UNIT // 2])) == 1
    assert q.min_size().tolist() == [0, 0]
    np.testing.assert_allclose(max_reduce([[32, 2], [8, 8]], [64, 16]), [0.5, 0.5])


@pytest.mark.parametrize("prefix", [0, 3, 64])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masked_jobs_groups_match_a_positional_scan(seed, prefix):
    """The grouped compiled queries answer as the flat scans over every queued position (oldest first), whatever
    the length of the positional prefix the queries scan first."""
    from megha.schedulers.packing import _kernels as k

    rng = np.random.default_rng(seed)
    m = MaskedJobs(capacity=4)
    m.SMALL = 0  # always the compiled, grouped path
    m.PREFIX = prefix
    order: list[int] = []  # live jobs, oldest first
    sizes = [1, 3, 5, UNIT // 2, UNIT]
    nxt = 0
    for _ in range(3000):
        op = rng.choice(["add", "add", "remove", "best", "departed"], p=[0.3, 0.1, 0.3, 0.2, 0.1])
        if op == "add":
            m.add(nxt, sizes[rng.integers(5)], int(rng.integers(8)), int(rng.integers(3)))
            order.append(nxt)
            nxt += 1
        elif op == "remove" and order:
            m.remove(order.pop(int(rng.integers(len(order)))))
        elif op == "best":
            room = [1, 4, UNIT // 2, UNIT][rng.integers(4)]
            inv = ~int(rng.integers(8)) & 0xFFFFFFFF
            typ = int(rng.integers(4)) - 1
            p, _ = k.k_best_job(m.size, m.mask, m.typ, m.alive, 0, m.top, room, inv, typ)
            assert m.best(room, inv, typ) == (-1 if p < 0 else int(m.ids[p]))
        elif op == "departed":
            nd = int(rng.integers(1, 4))
            rooms = [[UNIT, UNIT // 2, 3, 1][rng.integers(4)] for _ in range(nd)]
            invs = [~int(rng.integers(8)) & 0xFFFFFFFF for _ in range(nd)]
            hi = m.pos[order[rng.integers(len(order))]] if order and rng.random() < 0.5 else m.top
            pos, srv, _ = k.k_fit_departed(
                m.size, m.mask, m.alive, 0, hi, np.array(rooms, dtype=np.int64), np.array(invs, dtype=np.uint32)
            )
            assert m.fit_departed(rooms, invs, hi) == list(zip(m.ids[pos].tolist(), srv.tolist(), strict=True))


@pytest.mark.parametrize("prefix", [0, 3, 64])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masked_jobs_take_oldest_is_fit_departed_on_one_server(seed, prefix):
    """take_oldest (one compiled call that also dequeues) places what fit_departed over that one server places, and
    leaves the queue as removing those jobs would."""
    rng = np.random.default_rng(seed)
    a, b = MaskedJobs(capacity=4), MaskedJobs(capacity=4)
    for m in (a, b):
        m.SMALL = 0
        m.PREFIX = prefix
    order: list[int] = []
    sizes = [1, 3, 5, UNIT // 2, UNIT]
    nxt = 0
    for _ in range(2000):
        op = rng.choice(["add", "job", "remove", "take"], p=[0.3, 0.1, 0.2, 0.4])
        if op == "add":
            x, mk, t = sizes[rng.integers(5)], int(rng.integers(8)), int(rng.integers(3))
            for m in (a, b):
                m.add(nxt, x, mk, t)
            order.append(nxt)
            nxt += 1
        elif op == "job":  # a job's tasks alike, or not: add_many's two ways of finding the groups
            k = int(rng.integers(1, 6))
            mk = int(rng.integers(8))
            xs = [UNIT // 2] * k if rng.random() < 0.5 else [sizes[rng.integers(5)] for _ in range(k)]
            jobs = list(range(nxt, nxt + k))
            for m in (a, b):
                m.add_many(jobs, xs, [mk] * k)
            order += jobs
            nxt += k
        elif op == "remove" and order:
            j = order.pop(int(rng.integers(len(order))))
            a.remove(j)
            b.remove(j)
        elif op == "take":
            room = [1, 4, UNIT // 2, UNIT][rng.integers(4)]
            inv = ~int(rng.integers(8)) & 0xFFFFFFFF
            want = [j for j, _ in b.fit_departed([room], [inv], b.top)]
            for j in want:
                b.remove(j)
                order.remove(j)
            rows = a.take_oldest(room, inv)
            assert [j for j, _ in rows] == want
            assert all(x in sizes for _, x in rows)
        assert list(a.live) == list(b.live) == order
        assert a.pos == b.pos
        assert a.best(UNIT, 0) == b.best(UNIT, 0)
        for m in (a, b):  # the per-bit counts of non-empty groups agree with the per-bit slot sets
            counts = [sum(bin(int(w)).count("1") for w in m.abits[bit]) for bit in range(32)]
            assert m.st[3:].tolist() == counts


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_masked_jobs_take_best_fit_is_best_fit_mask_then_remove(seed):
    """take_best_fit (one compiled call) places the jobs where best_fit_mask and add would, one after the other, and
    dequeues them as remove would; the block bounds end the same."""
    rng = np.random.default_rng(seed)
    n = 300
    server_masks = rng.integers(0, 8, n).tolist()
    inv = [~m & 0xFFFFFFFF for m in server_masks]
    a, b = LineServers(n), LineServers(n)
    a.enable_masks(inv)
    b.enable_masks(inv)
    qa, qb = MaskedJobs(), MaskedJobs()
    sizes = [1, UNIT // 3, UNIT // 2, UNIT]
    nxt = 0
    for _ in range(40):
        k = int(rng.integers(1, 30))
        jobs = list(range(nxt, nxt + k))
        nxt += k
        xs = [sizes[rng.integers(4)] for _ in jobs]
        ms = [int(rng.integers(8)) for _ in jobs]
        qa.add_many(jobs, xs, ms)
        qb.add_many(jobs, xs, ms)
        want = []
        for j, x, m in zip(jobs, xs, ms, strict=True):
            s = b.best_fit_mask(x, m, inv)
            if s >= 0:
                b.add(s, x)
                qb.remove(j)
                want.append([jobs.index(j), s])
        got = qa.take_best_fit(jobs, xs, ms, a.room_np, a.inv_np, a.bmax_np)
        assert got == want
        for i, s in got:  # the rest of LineServers.add (the kernel lowered the room)
            a.used[s] += xs[i]
            a.njobs[s] += 1
        assert a.room_np.tolist() == b.room_np.tolist() and a.bmax_np.tolist() == b.bmax_np.tolist()
        assert list(qa.live) == list(qb.live) and qa.pos == qb.pos
        for s in rng.choice(n, 20, replace=False).tolist():  # departures
            if a.used[s]:
                x = a.used[s]
                a.sub(s, x)
                b.sub(s, x)


def test_masked_jobs_rebuild_numbers_groups_by_first_appearance():
    """A compaction keeps the live jobs in order and numbers their groups by first appearance (as a per-position
    loop would), each position linked to its own group."""
    rng = np.random.default_rng(5)
    m = MaskedJobs()
    jobs = list(range(500))
    keys = [(int(rng.choice([1, UNIT])), int(rng.integers(6)), int(rng.integers(2))) for _ in jobs]
    for j, (x, mk, t) in zip(jobs, keys, strict=True):
        m.add(j, x, mk, t)
    for j in rng.choice(500, 200, replace=False).tolist():
        m.remove(j)
    live = [j for j in jobs if j in m.pos]
    m._rebuild()
    want: dict[tuple[int, int, int], int] = {}
    for j in live:
        want.setdefault(keys[j], len(want))
    assert m.gid == want
    assert m.ids[: len(live)].tolist() == live and m.pos == {j: p for p, j in enumerate(live)}
    assert m.P[5, : len(live)].tolist() == [want[keys[j]] for j in live]  # P_GRP
    assert m.best(UNIT, 0) == max(live, key=lambda j: (keys[j][0], -j))


@pytest.mark.parametrize("seed", [0, 1])
def test_first_empty_fit_matches_a_plain_scan(seed):
    """k_first_empty_fit (branch-free blocks, an unused mask as all ones) answers as the plain per-server scan."""
    from megha.schedulers.packing import _kernels as k

    rng = np.random.default_rng(seed)
    n = 300
    for _ in range(300):
        empty = rng.random(n) < rng.choice([0.01, 0.3, 0.9])
        inv = rng.integers(0, 16, n).astype(np.uint32)
        inv[rng.random(n) < 0.05] = 0  # servers with every attribute
        lo = int(rng.integers(0, n))
        ma, mb = int(rng.integers(16)), int(rng.integers(16))
        ua, ub = bool(rng.integers(2)), bool(rng.integers(2))
        want = next(
            (s for s in range(lo, n) if empty[s] and ((ua and not int(inv[s]) & ma) or (ub and not int(inv[s]) & mb))),
            -1,
        )
        assert k.k_first_empty_fit(empty, inv, lo, ma, ua, mb, ub) == want
