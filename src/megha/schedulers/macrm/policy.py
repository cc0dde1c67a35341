"""MACRM's sampling and load-adaptive rules (thesis §3.1.3–3.1.5): the sampling rate, when a sampling round ends,
and the distributed/centralized switch."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np

RoundEnd = Literal["all", "enough", "timeout"]
ROUND_ENDS: tuple[str, ...] = ("all", "enough", "timeout")
"""When a sampler (a job manager, or the arbitrator sampling for a job-manager container) stops waiting for answers.

The thesis (§3.1.3) starts a timer after sending the inquiries, waits for responses, and retries "if the job manager
cannot acquire enough resources from the received responses and the timer times out"; a node that cannot serve
sends nothing (Fig. 3.3), so silence is only ever detected by the timeout. It leaves open whether a sampler that
already holds enough answers still waits. Three readings:

* ``all`` — decide once every sampled node answered, else at the timeout: the least loaded of all d·n nodes
  (power of d choices), at the price of a full timeout whenever one sampled node is silent. The default.
* ``enough`` — decide as soon as the answers received can hold every task of the round (answers arriving at the
  same instant are still compared), else at the timeout.
* ``timeout`` — always decide when the timer fires (the timer is the only trigger).
"""

ADAPTIVE_FROM = 75.0
"""Below this cluster load (percent) the initial sampling rate is the power of two choices, d = 2."""


def adaptive_rate(load: float) -> float:
    """Initial sampling rate for cluster load ``load`` in [0, 1] (thesis Eq. 3.1).

    ``d = 2`` below 75 %, else ``d = 0.02x² − 2.9x + 107`` with ``x`` = load in percent (2 at 75 %, 3 at 80 %,
    5 at 85 %, 8 at 90 %, 12 at 95 %). Loads are clipped to [0, 100] %.
    """
    if not math.isfinite(load):
        raise ValueError(f"cluster load must be a finite number, got {load}")
    x = min(max(load, 0.0), 1.0) * 100.0
    if x < ADAPTIVE_FROM:
        return 2.0
    return max(2.0, 0.02 * x * x - 2.9 * x + 107.0)


def round_rate(initial: float, retry: int, doubling: bool) -> float:
    """Sampling rate of retry ``retry`` (0 = first round): doubled after each failure when ``doubling``."""
    return initial * (2.0**retry) if doubling else initial


def samples_for(rate: float, tasks: int, eligible: int) -> int:
    """Distinct nodes to sample for ``tasks`` tasks at rate ``rate`` (batch sampling: ``⌈d·n⌉``, at most
    ``eligible``)."""
    return min(math.ceil(rate * tasks - 1e-9), eligible)


def round_action(rule: str, answered: int, sampled: int, fits_all: Callable[[], bool]) -> str:
    """What a sampler does after an answer arrived (:data:`ROUND_ENDS`): ``"place"`` now, ``"defer"`` (place once
    the answers arriving at this same instant are in), or ``"wait"`` (for more answers or the timeout).

    ``answered`` of the ``sampled`` nodes have answered so far; ``fits_all`` (called only when needed) tells whether
    those answers can hold every task of the round."""
    if rule == "timeout":
        return "wait"
    if answered >= sampled:
        return "place"
    if rule == "all":
        return "wait"
    if rule == "enough":
        return "defer" if fits_all() else "wait"
    raise ValueError(f"unknown round end {rule!r} ({' | '.join(ROUND_ENDS)})")


class ModeSwitch:
    """Distributed ↔ centralized allocation with hysteresis (thesis §3.1.5).

    Centralized when the load reaches ``enter`` (free resources below 10 %: load ≥ 0.9); back to distributed
    only when the load falls below ``enter − hysteresis``, so a load hovering at the threshold does not flap.
    """

    def __init__(self, enter: float = 0.9, hysteresis: float = 0.05, enabled: bool = True) -> None:
        if not 0.0 < enter <= 1.0:
            raise ValueError(f"switch load must be in (0, 1], got {enter}")
        if not 0.0 <= hysteresis < enter:
            raise ValueError(f"hysteresis must be in [0, {enter}), got {hysteresis}")
        self.enter = float(enter)
        self.exit = float(enter - hysteresis)
        self.enabled = enabled
        self.central = False
        self.switches = 0

    def update(self, load: float) -> bool:
        """Feed the current load; returns True when the mode changed."""
        if not self.enabled:
            return False
        if not self.central and load >= self.enter - 1e-6:
            self.central = True
        elif self.central and load < self.exit - 1e-6:
            self.central = False
        else:
            return False
        self.switches += 1
        return True


def cluster_load(used: np.ndarray, total: np.ndarray, metric: str = "max") -> float:
    """Load in [0, 1] from used and total resource vectors: the largest fraction (``max``), CPU only (``cpu``,
    the first resource) or the mean over resources (``mean``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(total > 0, used / np.where(total > 0, total, 1.0), 0.0)
    if frac.size == 0:
        return 0.0
    if metric == "max":
        return float(frac.max())
    if metric == "cpu":
        return float(frac[0])
    if metric == "mean":
        return float(frac.mean())
    raise ValueError(f"unknown load metric {metric!r} (max | cpu | mean)")
