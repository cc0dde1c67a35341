"""Packed bit vectors and constraint matching against plain-Python oracles (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.model import bitset
from megha.model.constraints import NUM_CONSTRAINTS
from megha.model.matching import FastRandom, Policy, SegmentedIndex, WaitQueue

bools = st.lists(st.booleans(), min_size=1, max_size=300)


@given(bools)
def test_pack_unpack_roundtrip(bits):
    v = bitset.pack(np.array(bits))
    assert v.size == bitset.words_for(len(bits))
    assert bitset.unpack(v, len(bits)).tolist() == bits
    assert bitset.count(v) == sum(bits)
    assert bitset.set_indices(v).tolist() == [i for i, b in enumerate(bits) if b]


@given(bools, st.integers(0, 2**32 - 1))
def test_first_random_and_min_weight(bits, seed):
    v = bitset.pack(np.array(bits))
    ones = [i for i, b in enumerate(bits) if b]
    assert bitset.first_set(v) == (ones[0] if ones else -1)
    r = bitset.random_set(v, np.random.default_rng(seed))
    assert (r in ones) if ones else r == -1
    weights = np.random.default_rng(seed).integers(0, 5, size=v.size * 64)
    m = bitset.min_weight_set(v, weights)
    if ones:
        best = min(ones, key=lambda i: (weights[i], i))
        assert m == best
    else:
        assert m == -1


@given(st.lists(bools, min_size=2, max_size=4).filter(lambda ls: len({len(x) for x in ls}) == 1))
def test_and_all(vectors):
    packed = [bitset.pack(np.array(v)) for v in vectors]
    got = bitset.unpack(bitset.and_all(packed), len(vectors[0])).tolist()
    assert got == [all(col) for col in zip(*vectors, strict=True)]


@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.integers(1, 150))
@settings(max_examples=60, deadline=None)
def test_segmented_index_matches_oracle(seed, n_seg, seg_max):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, seg_max + 1, size=n_seg)
    n = int(sizes.sum())
    masks = rng.integers(0, 2**NUM_CONSTRAINTS, size=n).astype(np.uint32)
    perm = rng.permutation(n)
    segs = np.split(perm, np.cumsum(sizes)[:-1])
    idx = SegmentedIndex(list(segs), masks)
    free = rng.random(n) < 0.6
    avail = idx.pack_workers(free)
    rnd = FastRandom(np.random.default_rng(seed))
    for _ in range(5):
        task = (
            int(rng.integers(0, 2**NUM_CONSTRAINTS))
            & int(rng.integers(0, 2**NUM_CONSTRAINTS))
            & int(rng.integers(0, 2**NUM_CONSTRAINTS))
        )
        cand = idx.candidates(avail, task)
        ok = [[int(w) for w in s if free[w] and (task & ~int(masks[w])) == 0] for s in segs]
        assert idx.segments_with(cand).tolist() == [bool(x) for x in ok]
        for s, good in enumerate(ok):
            for pol in Policy:
                w = idx.pick(cand, s, pol, rnd)
                if not good:
                    assert w == -1
                    continue
                assert w in good
                if pol is Policy.FIRST:
                    assert w == good[0]
                if pol is Policy.MIN_CONSTRAINTS:
                    pc = [bin(int(masks[x])).count("1") for x in good]
                    assert bin(int(masks[w])).count("1") == min(pc)


def test_random_pick_is_uniform():
    masks = np.zeros(100, dtype=np.uint32)
    idx = SegmentedIndex([np.arange(100)], masks)
    rnd = FastRandom(np.random.default_rng(0))
    counts = np.bincount([idx.pick(idx.valid, 0, Policy.RANDOM, rnd) for _ in range(20000)], minlength=100)
    assert counts.min() > 120 and counts.max() < 290


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 15)), max_size=60), st.lists(st.integers(0, 15), max_size=30))
@settings(deadline=None)  # the first call compiles the numba kernel
def test_wait_queue_first_fit_matches_fifo_oracle(pushes, workers):
    q = WaitQueue()
    oracle: list[tuple[int, int]] = []
    for i, (front, mask) in enumerate(pushes):
        if front:
            q.push_front(i, mask)
            oracle.insert(0, (i, mask))
        else:
            q.push_back(i, mask)
            oracle.append((i, mask))
    for wm in workers:
        got = q.pop_first_fitting(wm)
        want = next(((e, m) for e, m in oracle if m & ~wm == 0), None)
        if want is None:
            assert got is None
        else:
            assert got == want[0]
            oracle.remove(want)
        assert len(q) == len(oracle)
    assert q.entries() == [e for e, _ in oracle]


def test_wait_queue_accept_filter_and_compaction():
    q = WaitQueue()
    for i in range(2000):
        q.push_back(i, i)  # many distinct masks to trigger compaction
    for i in range(1990):
        assert q.pop_first_fitting(0xFFFFFFFF) == i
    assert len(q) == 10
    assert q.pop_first_fitting_where(0xFFFFFFFF, lambda e: e % 2 == 1) == 1991
    assert q.pop_front() == 1990
