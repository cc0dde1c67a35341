"""Properties of every packing policy: capacity never exceeded, maximal packing, every job served."""

from __future__ import annotations

import heapq

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.schedulers.packing.policies import POLICIES, make_policy
from megha.schedulers.packing.slotted import SlotWorkload, run_slotted
from megha.schedulers.packing.structures import UNIT, quantize
from megha.schedulers.packing.workloads import synthetic

MAXIMAL = ("bf-j", "bf-s", "bf-js", "vqs-bf")  # after a slot, no queued job fits any server

slots_strategy = st.lists(
    st.lists(st.tuples(st.floats(0.01, 1.0), st.integers(1, 12)), max_size=4), min_size=1, max_size=25
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(POLICIES)), st.integers(1, 4), slots_strategy)
def test_capacity_maximality_and_completion(name, n, slots):
    p = make_policy(name, n, J=3)
    used = [0] * n
    size: dict[int, int] = {}
    where: dict[int, int] = {}
    queued: set[int] = set()
    heap: list[tuple[int, int]] = []
    svc: dict[int, int] = {}
    nxt = 0
    t = 0
    while t < len(slots) or heap or queued:
        while heap and heap[0][0] == t:
            _, j = heapq.heappop(heap)
            s = where[j]
            p.depart(j, s)
            used[s] -= size[j]
        if t < len(slots) and slots[t]:
            ids = list(range(nxt, nxt + len(slots[t])))
            nxt += len(ids)
            xs = [quantize(x) for x, _ in slots[t]]
            for j, x, (_, d) in zip(ids, xs, slots[t], strict=True):
                size[j], svc[j] = x, d
            queued.update(ids)
            p.arrive(ids, xs)
        for j, s in p.schedule():
            assert j in queued and j not in where
            queued.discard(j)
            where[j] = s
            used[s] += size[j]
            assert used[s] <= UNIT, f"{name}: server {s} over capacity"
            heapq.heappush(heap, (t + svc[j], j))
        assert p.queue_len() == len(queued)
        if name in MAXIMAL and queued:
            # sizes and rooms as the policy sees them (VQS-BF rounds jobs below 1/2^J up)
            smallest = min(p.size[j] for j in queued)
            assert smallest > max(p.residual(s) for s in range(n)), f"{name}: a queued job fits at slot {t}"
            assert all(p.residual(s) <= UNIT - used[s] for s in range(n))
        t += 1
        assert t < 10_000, f"{name}: jobs never served"
    assert len(where) == nxt  # every job was placed exactly once


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(POLICIES)),
    st.integers(1, 6),
    st.floats(0.05, 0.9),
    st.floats(0.0, 0.5),
    st.integers(0, 2**31 - 1),
)
def test_every_job_served_below_supported_load(name, n, lo, width, seed):
    """ρ = 0.2 is below what every policy supports (≥ 1/2 and ≥ 2/3 of a maximum that is ≥ 1/2)."""
    hi = min(1.0, lo + width)
    mean = (lo + hi) / 2
    rate = 0.2 * n / (mean * 20)  # ρ = rate · E[size] · E[service] / n
    wl = synthetic(rate, 4000, np.random.default_rng(seed), sizes=("uniform", lo, hi), service=("geometric", 20))
    r = run_slotted(make_policy(name, n, J=5), wl, drain=True)
    assert r.placed == r.departed == wl.n
    assert (r.start >= wl.arrival).all()
    assert r.mean_queue() < 10 * n + 10
    waits = r.waits(wl.arrival)
    assert waits.size == 0 or waits.max() < 3000


def test_deterministic_and_vector_of_one_resource_equals_scalar():
    wl = synthetic(0.3, 3000, np.random.default_rng(3), sizes=("uniform", 0.05, 0.8), service=("geometric", 30))
    wl1 = SlotWorkload(wl.arrival, wl.size[:, None], wl.service)
    for name in POLICIES:
        a = run_slotted(make_policy(name, 4), wl)
        b = run_slotted(make_policy(name, 4), wl)
        assert np.array_equal(a.start, b.start), name
        if name in ("fifo-ff", "bf-j", "bf-s", "bf-js"):
            v = run_slotted(make_policy(name, 4, vector=1), wl1)
            assert np.array_equal(a.start, v.start), name


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["fifo-ff", "bf-j", "bf-s", "bf-js"]), st.integers(0, 2**31 - 1))
def test_tetris_never_overcommits_any_resource(name, seed):
    rng = np.random.default_rng(seed)
    n = 300
    arr = np.sort(rng.integers(0, 400, size=n))
    size = np.column_stack([rng.uniform(0.01, 0.7, n), rng.uniform(0.01, 0.7, n)])
    wl = SlotWorkload(arr, size, rng.integers(1, 30, size=n))
    r = run_slotted(make_policy(name, 3, vector=2), wl, drain=True)  # the driver raises on over-commit
    assert r.placed == n
