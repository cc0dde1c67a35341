"""Placement constraints: the compiled fast paths make exactly the decisions of the generic scanning path.

A :class:`~megha.schedulers.packing.structures.Constraints` object lets the policies use compiled scans (servers
with departures plus servers a new job fits, first/best fit over flat arrays, queue scans); any other callable
goes through the plain scanning code. Both are driven through the same random slots and must place the same jobs
on the same servers in the same order.
"""

from __future__ import annotations

import numpy as np
import pytest

from megha.schedulers.packing.policies import POLICIES, make_policy
from megha.schedulers.packing.structures import UNIT, Constraints, quantize


def _drive(name: str, n_servers: int, seed: int, slots: int, unit_sizes: bool) -> list[list[tuple[int, int]]]:
    """Run ``name`` with a Constraints object and with a plain predicate over the same slots; return both logs."""
    rng = np.random.default_rng(seed)
    server_masks = rng.integers(0, 16, size=n_servers).tolist()  # 4 attribute bits per server
    fast_cons = Constraints(server_masks)
    fast = make_policy(name, n_servers, fast_cons)
    job_mask: dict[int, int] = {}
    inv = [~m & 0xFFFFFFFF for m in server_masks]
    slow = make_policy(name, n_servers, lambda j, s: (job_mask[j] & inv[s]) == 0)
    running: dict[int, int] = {}
    nxt = 0
    logs: tuple[list, list] = ([], [])
    for _ in range(slots):
        gone = [j for j in sorted(running) if rng.random() < 0.15]
        k = int(rng.poisson(6.0))
        jobs = list(range(nxt, nxt + k))
        nxt += k
        # mostly unconstrained or one-bit jobs, a few needing two attributes
        masks = [int(rng.choice([0, 0, 1, 2, 4, 8, 3, 12])) for _ in jobs]
        if unit_sizes:
            sizes = [UNIT] * k
        else:
            sizes = [quantize(float(x)) for x in rng.choice([0.1, 0.25, 0.3, 0.45, 0.55, 0.7, 0.9], size=k)]
        job_mask.update(zip(jobs, masks, strict=True))
        fast_cons.set(jobs, masks)
        for p, log in zip((fast, slow), logs, strict=True):
            for j in gone:
                p.depart(j, running[j])
            p.arrive(jobs, sizes)
            log.append(p.schedule())
        assert logs[0][-1] == logs[1][-1], f"{name} seed {seed}: slot {len(logs[0]) - 1} differs"
        if getattr(fast, "_empty_np", None) is not None:  # VQS counts its empty servers beside the array
            assert fast._n_empty == int(fast._empty_np.sum())
        for j in gone:
            del running[j]
            fast_cons.forget(j)
        running.update(logs[0][-1])
    return list(logs)


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("unit_sizes", [True, False], ids=["slot", "sized"])
def test_constrained_fast_path_matches_generic(name: str, unit_sizes: bool) -> None:
    for seed in range(3):
        fast, slow = _drive(name, n_servers=40, seed=seed, slots=300, unit_sizes=unit_sizes)
        assert sum(len(x) for x in fast) > 100, "the run should place jobs"
        for t, (a, b) in enumerate(zip(fast, slow, strict=True)):
            assert a == b, f"{name} seed {seed}: slot {t} differs"
