"""The compiled graph's per-round bookkeeping against plain references of its rules, call by call.

* ``k_jobs`` (fairness bounds, with the demands' sorted values kept between calls) is checked against the rule
  written plainly (a pass per quantity, the sorted demands compared with a fresh sort), on copies of the same
  state: the same bounds, flags, sorted demands and network edits must come out.
"""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.runner import simulate
from megha.schedulers.flow import _graph_kernels as GK
from megha.schedulers.flow import _kernels as K


def _reference_jobs(
    N, A, H, M, DN, DA, JT, act, GM, capacity, unplaceable, fair, node_role, node_ref, group_role, GT, CT, cdirty,
    jdem, dsorted, exact_keys,
):  # fmt: skip
    """The rule of ``k_jobs`` written plainly, one pass per quantity."""
    nact = int(GM[GK.GM_NACT])
    rem: list[int] = []
    alive = []
    for j in act[:nact].tolist():
        if JT[GK.JT_ALIVE, j] == 1:
            alive.append(j)
        elif jdem[j] >= 0:
            rem.append(int(jdem[j]))
            jdem[j] = -1
    k = len(alive)
    act[:k] = alive
    GM[GK.GM_NACT] = k
    n_in = np.array([JT[GK.JT_IN, j] for j in alive], dtype=np.int64)
    lower = np.zeros(k, dtype=np.int64)
    if fair:
        d = np.array(
            [JT[GK.JT_IN, j] + JT[GK.JT_RUN, j] - (unplaceable[j] if unplaceable.size else 0) for j in alive],
            dtype=np.int64,
        )
        ins = []
        for i, j in enumerate(alive):
            if d[i] != jdem[j]:
                if jdem[j] >= 0:
                    rem.append(int(jdem[j]))
                ins.append(int(d[i]))
                jdem[j] = d[i]
        nds = int(GM[GK.GM_NDS])
        if rem or ins:
            r = np.array([*rem, 0], dtype=np.int64)
            s = np.array([*ins, 0], dtype=np.int64)
            nds = GK._sorted_update(dsorted, nds, r, len(rem), s, len(ins))
            GM[GK.GM_NDS] = nds
        assert np.array_equal(dsorted[:nds], np.sort(d)), "the sorted demands are the active jobs' demands"
        share = np.empty(k, dtype=np.int64)
        GK._max_min_sorted(d, dsorted[:nds], capacity, int(d.sum()), share)
        for i, j in enumerate(alive):
            lower[i] = max(n_in[i] - max(share[i] - JT[GK.JT_RUN, j], 0), 0)
    for i, j in enumerate(alive):
        if lower[i] != JT[GK.JT_LOWER, j] or n_in[i] != JT[GK.JT_UPPER, j]:
            held = n_in[i] <= lower[i]
            if (n_in[i] <= JT[GK.JT_LOWER, j]) != held:
                keys = GK.KEYS_STALE if not exact_keys else (GK.KEYS_LEAVE if held else GK.KEYS_JOIN)
                GK._stale_job_classes(
                    N, A, H, node_role, node_ref, group_role, GT, JT, CT, j, cdirty, GM, not held, keys
                )
            K._set_bound(N, A, H, M, DN, DA, JT[GK.JT_ARC, j], lower[i], n_in[i])
            JT[GK.JT_LOWER, j] = lower[i]
            JT[GK.JT_UPPER, j] = n_in[i]
    GM[GK.GM_JOBS] = 0


_JOBS_MUTABLE = (0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 18, 19, 20)  # k_jobs's arguments it may write


def _run(monkeypatch, jobs, **opts) -> None:
    """A small overloaded run whose ``k_prepare`` calls ``jobs`` (a Python callable) for its ``k_jobs`` step."""

    def prepare(*a):
        N, A, H, M, DN, DA, GM, CT, cdirty = a[0], a[1], a[2], a[3], a[5], a[6], a[7], a[8], a[9]
        node_role, node_ref, group_role, GT, JT, out = a[12], a[13], a[14], a[16], a[17], a[40]
        do_jobs, act, capacity, unplaceable, fair, jdem, dsorted, exact_keys = a[41:]
        if do_jobs:
            jobs(
                N, A, H, M, DN, DA, JT, act, GM, capacity, unplaceable, fair, node_role, node_ref, group_role, GT, CT,
                cdirty, jdem, dsorted, exact_keys,
            )  # fmt: skip
        GK.k_update(*a[:40], 1, out)

    monkeypatch.setattr(GK, "k_prepare", prepare)
    monkeypatch.setattr(GK, "k_prepare_packed", GK.k_prepare_packed.py_func)
    simulate(RunConfig(scheduler="flow", trace="sample:GOOG_subtrace", workers=400, max_jobs=60, options=opts))


@pytest.mark.parametrize(
    "opts",
    [{}, {"fairness": False}, {"ec_fanin": 2, "ec_fanout": 8}, {"placement_cost": 2000}],  # last: clock runs
)
def test_k_jobs_matches_the_plain_rule_call_by_call(monkeypatch, opts: dict) -> None:
    seen = {"calls": 0, "held": 0}
    compiled_jobs = GK.k_jobs

    def checked_jobs(*args):
        copies = list(args)
        for i in _JOBS_MUTABLE:
            copies[i] = args[i].copy()
        compiled_jobs(*args)
        _reference_jobs(*copies)
        for i in _JOBS_MUTABLE:
            np.testing.assert_array_equal(args[i], copies[i], err_msg=f"k_jobs argument {i}")
        JT, act, GM = args[6], args[7], args[8]
        a = act[: int(GM[GK.GM_NACT])]
        seen["calls"] += 1
        seen["held"] += int((JT[GK.JT_LOWER, a] > 0).any())

    _run(monkeypatch, checked_jobs, **opts)
    assert seen["calls"] > 20
    assert seen["held"] > 0 or opts.get("fairness") is False  # the fair shares bind at some call
