"""MACRM's load-adaptive rules: the sampling-rate formula (thesis Eq. 3.1), doubling, the mode switch (hysteresis)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from megha.schedulers.macrm.policy import (
    ROUND_ENDS,
    ModeSwitch,
    adaptive_rate,
    cluster_load,
    round_action,
    round_rate,
    samples_for,
)


def test_rate_is_power_of_two_below_75_percent():
    for load in (0.0, 0.3, 0.6, 0.7499):
        assert adaptive_rate(load) == 2.0


@pytest.mark.parametrize(("load", "rate"), [(0.75, 2.0), (0.80, 3.0), (0.85, 5.0), (0.90, 8.0), (0.95, 12.0)])
def test_rate_formula_hits_the_thesis_interpolation_points(load, rate):
    # the thesis fitted d = 0.02x² − 2.9x + 107 to the best rates 2, 3, 5, 8 at 75, 80, 85, 90 %
    assert adaptive_rate(load) == pytest.approx(rate)


@given(st.floats(0.75, 1.0))
def test_rate_formula_matches_eq_3_1(load):
    x = load * 100
    assert adaptive_rate(load) == pytest.approx(max(2.0, 0.02 * x * x - 2.9 * x + 107))


def test_rate_is_non_decreasing_and_clipped():
    loads = np.linspace(0, 1, 501)
    rates = [adaptive_rate(x) for x in loads]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(rates))
    assert adaptive_rate(1.7) == adaptive_rate(1.0) and adaptive_rate(-1) == 2.0
    with pytest.raises(ValueError):
        adaptive_rate(math.nan)


def test_doubling_and_batch_sample_count():
    assert [round_rate(2, r, True) for r in range(4)] == [2, 4, 8, 16]
    assert [round_rate(2, r, False) for r in range(3)] == [2, 2, 2]
    assert samples_for(2.0, 9, 200) == 18
    assert samples_for(8.0, 9, 50) == 50  # at most the eligible nodes
    assert samples_for(2.5, 3, 100) == 8  # ⌈d·n⌉


def test_mode_switch_enters_at_90_percent_and_leaves_only_below_the_hysteresis_band():
    m = ModeSwitch(0.9, 0.05)
    assert not m.update(0.5) and not m.central
    assert not m.update(0.8999)
    assert m.update(0.90) and m.central  # free resources below 10 %
    for x in (0.89, 0.86, 0.851, 0.88, 0.95):  # hovering near the threshold does not flap
        assert not m.update(x) and m.central
    assert m.update(0.849) and not m.central
    assert not m.update(0.89) and not m.central
    assert m.update(0.93) and m.central
    assert m.switches == 3


def test_mode_switch_disabled_and_bad_parameters():
    m = ModeSwitch(enabled=False)
    assert not m.update(1.0) and not m.central
    with pytest.raises(ValueError):
        ModeSwitch(0.0)
    with pytest.raises(ValueError):
        ModeSwitch(0.9, 0.95)


def test_cluster_load_metrics():
    used = np.array([50.0, 90.0])
    total = np.array([100.0, 100.0])
    assert cluster_load(used, total, "max") == pytest.approx(0.9)
    assert cluster_load(used, total, "cpu") == pytest.approx(0.5)
    assert cluster_load(used, total, "mean") == pytest.approx(0.7)
    assert cluster_load(used, np.array([0.0, 100.0])) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        cluster_load(used, total, "median")


def test_round_end_rules():
    def never():
        raise AssertionError("fits_all must not be evaluated")

    yes, no = (lambda: True), (lambda: False)
    assert ROUND_ENDS == ("all", "enough", "timeout")
    # all: only a complete set of answers ends the round before the timeout
    assert round_action("all", 4, 4, never) == "place"
    assert round_action("all", 3, 4, never) == "wait"
    # enough: as soon as the answers hold every task (after the answers of this instant), or when all answered
    assert round_action("enough", 4, 4, never) == "place"
    assert round_action("enough", 2, 4, yes) == "defer"
    assert round_action("enough", 2, 4, no) == "wait"
    # timeout: the timer is the only trigger
    assert round_action("timeout", 4, 4, never) == "wait"
    with pytest.raises(ValueError, match="round end"):
        round_action("first", 1, 2, yes)
