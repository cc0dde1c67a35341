"""The compiled probe sampler draws exactly what the NumPy form draws (outputs and the generator's state after)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from megha.schedulers.common.sampling import ProbeSampler


def _check(sampler: ProbeSampler, seed: int, gmasks: list[int], want: list[int], need: list[int]) -> None:
    a = np.random.default_rng(seed)
    b = np.random.default_rng(seed)
    a.random()  # an odd number of 32-bit halves: the bit generator holds a spare one
    b.random()
    if seed % 2:
        a.integers(0, 7, 3)
        b.integers(0, 7, 3)
    w1, g1 = sampler.sample(a, gmasks, want, need)
    w2, g2 = sampler.sample_reference(b, gmasks, want, need)
    assert w1.dtype == w2.dtype and g1.dtype == g2.dtype
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(g1, g2)
    assert a.bit_generator.state == b.bit_generator.state
    assert a.random() == b.random()


def _masks(rng: np.random.Generator, n: int, bits: int, p: float) -> np.ndarray:
    m = np.zeros(n, dtype=np.uint32)
    for b in range(bits):
        m |= (rng.random(n) < p).astype(np.uint32) << np.uint32(b)
    return m


@pytest.mark.parametrize("seed", range(12))
def test_compiled_sampler_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.choice([50, 300, 2000, 10_000]))
    wm = _masks(rng, n, 6, float(rng.choice([0.2, 0.5, 0.9])))
    sampler = ProbeSampler(wm, exact_below=float(rng.choice([0.0, 0.05, 0.3])))
    for _ in range(15):
        G = int(rng.integers(1, 30))
        gmasks = [int(x) for x in _masks(rng, G, 6, float(rng.choice([0.05, 0.2, 0.4])))]
        need = [int(x) for x in rng.integers(1, 40, G)]
        want = [math.ceil(float(rng.choice([1.0, 1.5, 2.0])) * k) for k in need]
        gmasks = [m for m in gmasks if sampler.eligible_count(m) > 0] or [0]
        G = len(gmasks)
        _check(sampler, seed, gmasks, want[:G], need[:G])


def test_unlucky_rejection_draws_match() -> None:
    # a group drawn by rejection that often gets too few distinct fits (completed exactly from the rest)
    n = 1000
    wm = np.zeros(n, dtype=np.uint32)
    wm[::20] = 1  # 50 eligible workers for mask 1
    sampler = ProbeSampler(wm, exact_below=0.0)
    for seed in range(40):
        _check(sampler, seed, [1, 0, 1], [25, 10, 24], [20, 5, 20])


def test_large_population_tail_shuffle_matches() -> None:
    # NumPy's choice shuffles the whole range for a population above 10,000 and many picks
    n = 20_000
    wm = np.zeros(n, dtype=np.uint32)
    wm[1::2] = 2
    sampler = ProbeSampler(wm)
    for seed in range(3):
        _check(sampler, seed, [0, 2, 0], [15_000, 6_000, 30], [15_000, 6_000, 12_000])


def test_few_eligible_workers_probed_again() -> None:
    wm = np.zeros(100, dtype=np.uint32)
    wm[:3] = 4
    sampler = ProbeSampler(wm)
    for seed in range(5):
        _check(sampler, seed, [4, 0, 4], [10, 3, 1], [7, 2, 1])
