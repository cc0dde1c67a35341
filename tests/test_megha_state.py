"""Megha's view objects: the fast forms give the same answers as the plain ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.model.topology import generate
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.state import ResourceView, SlotView


def _layout(n: int, seed: int, resources: bool) -> MeghaLayout:
    dc = generate(n, np.random.default_rng(seed))
    if resources:
        dc = dc.with_resources({"cpu": 4, "mem": 8})
    return MeghaLayout.build(dc, 2, 3)


ops = st.lists(
    st.tuples(
        st.sampled_from(["take", "give", "truth", "forget", "ask"]),
        st.integers(0, 10**6),
        st.floats(0, 4),
        st.floats(0, 8),
        st.integers(0, (1 << 21) - 1),
    ),
    max_size=120,
)


@given(n=st.integers(6, 150), seed=st.integers(0, 50), ops=ops, all_free=st.booleans())
@settings(max_examples=80, deadline=None)
def test_resource_view_candidates_equal_the_plain_form(n, seed, ops, all_free):
    lay = _layout(n, seed, True)
    v = ResourceView(lay.idx, lay.capacity, all_free=all_free)
    masks = np.unique(lay.worker_masks).tolist()
    for op, x, cpu, mem, m in ops:
        w = x % n
        dem = np.array([cpu, mem])
        if op == "take":
            v.take(w, dem)
        elif op == "give":
            v.give_back(w, dem)
        elif op == "truth":
            v.apply_truth(w, lay.capacity[w] - dem)
        elif op == "forget":
            v.forget(w)
        mask = masks[x % len(masks)] if x % 3 else m & masks[x % len(masks)]  # suitable workers exist or not
        a, b = v.candidates(mask, dem), v.candidates_reference(mask, dem)
        assert (a is None) == (b is None)
        if a is not None:
            assert np.array_equal(a, b)


@given(
    n=st.integers(6, 200),
    seed=st.integers(0, 50),
    ops=st.lists(
        st.tuples(st.sampled_from(["take", "release", "truth", "forget", "ack"]), st.integers(0, 10**6), st.booleans()),
        max_size=200,
    ),
)
@settings(max_examples=80, deadline=None)
def test_slot_view_bits_mirror_the_flags(n, seed, ops):
    lay = _layout(n, seed, False)
    v = SlotView(lay.idx, n)
    taken = []
    for op, x, free in ops:
        w = x % n
        if op == "take":
            v.take(w, None)
            taken.append(w)
        elif op == "release":
            v.release(w, None)
        elif op == "truth":
            assert v.apply_truths([w], [free]) == ([w] if v.apply_truth(w, free) else [])
        elif op == "forget":
            v.forget(w)
        elif taken:
            v.acked([taken.pop(0)], None)
        flags = np.frombuffer(bytes(v._flag), dtype=np.uint8).astype(bool)
        assert np.array_equal(v.avail, lay.idx.pack_workers(flags))
        assert v._words.tolist() == v.avail.tolist()  # the same memory, seen as Python ints
        assert v.n_free == int(flags.sum())


def test_first_segment_pick_is_the_search_then_the_random_pick():
    """The compiled placement (search one segment at a time, then a uniform set bit) makes the same choice as the
    search kernel followed by the Python pick it replaces."""
    from megha.model.matching import _random_bit
    from megha.schedulers.megha._kernels import first_segment_pick, first_segment_with

    class Fixed:  # FastRandom.below of one given uniform number
        def __init__(self, u: float) -> None:
            self.u = u

        def below(self, n: int) -> int:
            return min(int(self.u * n), n - 1)

    rng = np.random.default_rng(5)
    for _ in range(500):
        nseg, words = int(rng.integers(1, 6)), int(rng.integers(1, 5))
        starts = np.arange(nseg + 1, dtype=np.int64) * words
        avail = rng.integers(0, 2**63, size=nseg * words, dtype=np.uint64) * np.uint64(rng.integers(1, 3))
        static = rng.integers(0, 2**63, size=nseg * words, dtype=np.uint64)
        static[rng.random(static.size) > rng.random()] = 0
        order = rng.permutation(nseg).astype(np.int64)
        u = float(rng.random())
        k, b = first_segment_pick(avail, static, order, starts, u)
        assert k == first_segment_with(avail, static, order, starts)
        if k >= 0:
            lo, hi = starts[order[k]], starts[order[k] + 1]
            assert b == lo * 64 + _random_bit(np.bitwise_and(avail[lo:hi], static[lo:hi]).tolist(), Fixed(u))
        else:
            assert b == -1
