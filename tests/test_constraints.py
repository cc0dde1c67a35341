from __future__ import annotations

import numpy as np

from megha.model.constraints import (
    NUM_CONSTRAINTS,
    TASK_OCCURRENCE,
    bits_to_masks,
    expected_task_constraint_frequency,
    fits,
    ids_of,
    mask_of,
    masks_to_bits,
    synthesize_machine_constraints,
    synthesize_task_constraints,
)


def test_t2_columns_sum_to_one():
    assert np.allclose(TASK_OCCURRENCE.sum(axis=0), 1.0, atol=1e-6)


def test_task_constraint_frequencies_match_t1_t2():
    n = 100_000
    m = synthesize_task_constraints(n, np.random.default_rng(7))
    freq = masks_to_bits(m).mean(axis=0)
    p = expected_task_constraint_frequency()
    sigma = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) < 5 * sigma + 1e-4), (freq - p) / sigma


def test_synthesis_is_deterministic_by_seed():
    a = synthesize_task_constraints(5000, np.random.default_rng(1))
    b = synthesize_task_constraints(5000, np.random.default_rng(1))
    c = synthesize_task_constraints(5000, np.random.default_rng(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_chunking_does_not_change_the_draws():
    a = synthesize_task_constraints(3000, np.random.default_rng(5), chunk=1 << 18)
    b = synthesize_task_constraints(3000, np.random.default_rng(5), chunk=3000)
    assert np.array_equal(a, b)


def test_machine_constraints_fractions():
    p = np.linspace(0.05, 0.95, NUM_CONSTRAINTS)
    m = synthesize_machine_constraints(50_000, np.random.default_rng(3), p)
    assert np.allclose(masks_to_bits(m).mean(axis=0), p, atol=0.01)


def test_mask_helpers():
    assert mask_of([0, 2, 20]) == 0b100000000000000000101
    assert ids_of(mask_of([3, 7])) == [3, 7]
    bits = masks_to_bits(np.array([5, 0], dtype=np.uint32))
    assert np.array_equal(bits_to_masks(bits), [5, 0])
    assert fits(0b101, 0b111) and not fits(0b101, 0b011)
