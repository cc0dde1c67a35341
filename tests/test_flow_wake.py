"""The pending machines offered to the starved classes (``k_wake``) and the class urgencies it reads.

``k_wake`` offers the pending machines to the starved classes; it is checked, call by call in a whole simulation
of an overloaded constrained datacenter, against a plain reference of its rule (every pending machine scans every
starved class), on copies of the same state: the same arcs, targets, flags and pending list must come out. The
class urgencies cached between calls (``CT_KEY``) must equal a recomputation whenever they are not marked stale.
"""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.runner import simulate
from megha.schedulers.flow import _graph_kernels as GK
from megha.schedulers.flow import _kernels as K


def _reference_wake(
    N, A, H, M, FA, DN, DA, GM, CT, starved, pend, m_pend, cmark, node_role, node_ref, group_role, ec_role,
    GT, JT, t_mach, t_arc, arc_pos, m_node, m_arc, m_mask, m_wasfree, m_slots, fanout, spare, fanin, smask,
):  # fmt: skip
    """The rule of ``k_wake`` written plainly: every pending machine scans the whole starved list."""
    nst = int(GM[GK.GM_NST])
    if GM[GK.GM_NUNST] != 0:
        k = 0
        for i in range(nst):
            c = starved[i]
            if CT[GK.CT_FLAG, c] & GK.CF_STARVED == 0:
                CT[GK.CT_FLAG, c] &= ~GK.CF_LISTED
                continue
            starved[k] = c
            smask[k] = smask[i]
            k += 1
        nst = k
        GM[GK.GM_NST] = nst
        GM[GK.GM_NUNST] = 0
    cap = fanin if fanin > 0 else max(nst, 1)
    added = 0
    kept = 0
    for x in range(int(GM[GK.GM_NPEND])):
        m = pend[x]
        if m_wasfree[m] == 0 or nst == 0:
            m_pend[m] = 0
            continue
        mn = m_node[m]
        aiming = set()
        h = N[K.N_FIRST, mn]
        while h >= 0:
            if h & 1 == 1 and node_role[H[K.H_TO, h]] == ec_role:
                aiming.add(int(node_ref[H[K.H_TO, h]]))
            h = H[K.H_NEXT, h]
        cands = []  # (−key, position): the most urgent first, ties in list order
        skip = []
        for i in range(nst):
            c = int(starved[i])
            if smask[i] & ~m_mask[m] != 0 or c in aiming:
                continue
            want = CT[GK.CT_WAIT, c] + spare
            if fanout > 0:
                want = min(want, fanout)
            if CT[GK.CT_LIVE, c] >= want or CT[GK.CT_TN, c] >= CT[GK.CT_TCAP, c]:
                skip.append(c)
                continue
            if CT[GK.CT_FLAG, c] & GK.CF_KEYSTALE:
                CT[GK.CT_KEY, c] = GK._class_key(N, A, H, node_role, node_ref, group_role, GT, JT, CT[GK.CT_NODE, c])
                CT[GK.CT_FLAG, c] &= ~GK.CF_KEYSTALE
            if CT[GK.CT_KEY, c] == GK.NOKEY:
                skip.append(c)
                continue
            cands.append((-int(CT[GK.CT_KEY, c]), i, c))
        cands.sort()
        top = cands[:cap]
        for _, _, c in top:
            tn = CT[GK.CT_TN, c]
            t0 = CT[GK.CT_T0, c]
            node = CT[GK.CT_NODE, c]
            a = K._add_arc(N, A, H, M, FA, DN, DA, node, mn, 0, max(m_slots[m], 1), 0)
            t_mach[t0 + tn] = m
            t_arc[t0 + tn] = a
            arc_pos[a] = tn
            CT[GK.CT_TN, c] = tn + 1
            CT[GK.CT_LIVE, c] += 1
            if N[K.N_FLAG, node] & K.F_NEW == 0 and N[K.N_POT, mn] > N[K.N_POT, node]:
                N[K.N_POT, mn] = N[K.N_POT, node]
                K._mark_arc(A, M, DA, m_arc[m])
        added += len(top)
        if len(cands) > len(top):
            pend[kept] = m
            kept += 1
        else:
            m_pend[m] = 0
            for c in skip:
                CT[GK.CT_FLAG, c] |= GK.CF_MISSED
    GM[GK.GM_NPEND] = kept
    return added


_MUTABLE = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 19, 20, 21, 30)  # k_wake's arguments it writes (not its marks)


def _stepwise_for(wake):
    """``k_update`` step by step, calling ``wake`` (a Python callable) for its ``k_wake`` step."""

    def update(*a):
        (N, A, H, M, FA, DN, DA, GM, CT, cdirty, starved, smask, node_role, node_ref, group_role, ec_role, GT, JT,
         m_free, m_mask, m_arc, m_node, m_slots, m_wasfree, m_flag, m_fpos, mdirty, free_list, freed_buf, t_mach,
         t_arc, arc_pos, pend, m_pend, cmark, fit_pool, scratch, fanout, spare, fanin, refresh, out) = a  # fmt: skip
        do_refresh = refresh == 1 or (refresh == 2 and GK.k_unserved(CT, cdirty, GM))
        out[:] = 0
        out[GK.UPD_REFRESH] = int(do_refresh)
        if GM[GK.GM_NMD]:
            GK.k_machines(
                N, A, H, M, DN, DA, GM, CT, cdirty, starved, node_role, node_ref, ec_role, m_free, m_mask, m_arc,
                m_wasfree, m_flag, m_fpos, mdirty, free_list, freed_buf, True, FA, t_mach, t_arc, arc_pos, pend,
                m_pend,
            )  # fmt: skip
        npd, nst = int(GM[GK.GM_NPEND]), int(GM[GK.GM_NST])
        if npd and nst:
            if M[K.M_AFREE] + A.shape[1] - M[K.M_AHW] < npd * (min(fanin, nst) if fanin > 0 else nst) + 64:
                out[GK.UPD_STAGE] = 1
                return
            out[GK.UPD_ADDED] += wake(
                N, A, H, M, FA, DN, DA, GM, CT, starved, pend, m_pend, cmark, node_role, node_ref, group_role,
                ec_role, GT, JT, t_mach, t_arc, arc_pos, m_node, m_arc, m_mask, m_wasfree, m_slots, fanout, spare,
                fanin, smask,
            )  # fmt: skip
        if do_refresh and GM[GK.GM_NCD]:
            r = GK.k_refresh(
                N, A, H, M, FA, DN, DA, GM, CT, cdirty, starved, fit_pool, t_mach, t_arc, scratch, m_node, m_arc,
                m_mask, m_wasfree, m_slots, free_list, arc_pos, fanout, spare, 0, smask,
            )  # fmt: skip
            if r < 0:
                out[GK.UPD_STAGE] = 2
                return
            out[GK.UPD_ADDED] += r

    return update


def _prepare_for(update):
    """``k_prepare`` as its two steps, calling ``update`` (a Python callable) for its ``k_update`` step."""

    def prepare(*a):
        N, A, H, M, DN, DA, GM, CT, cdirty = a[0], a[1], a[2], a[3], a[5], a[6], a[7], a[8], a[9]
        node_role, node_ref, group_role, GT, JT, out = a[12], a[13], a[14], a[16], a[17], a[40]
        do_jobs, act, capacity, unplaceable, fair, jdem, dsorted, exact_keys = a[41:]
        if do_jobs:
            GK.k_jobs(
                N, A, H, M, DN, DA, JT, act, GM, capacity, unplaceable, fair, node_role, node_ref, group_role, GT, CT,
                cdirty, jdem, dsorted, exact_keys,
            )  # fmt: skip
        update(*a[:40], 1, out)

    return prepare


def _place_update_for(update):
    """``k_place_update`` as its two steps, calling ``update`` (a Python callable) for its ``k_update`` step."""

    def place_update(*a):
        (N, A, H, M, FN, FA, DN, DA, GM, CT, cdirty, JT, GT, order, node_role, node_ref, group_role, ec_role,
         cursor, used, touched, m_node, m_arc, m_free, m_flag, mdirty, gfree, free_list, exact_keys, starved, smask,
         m_mask, m_slots, m_wasfree, m_fpos, freed_buf, t_mach, t_arc, arc_pos, pend, m_pend, cmark, fit_pool,
         scratch, fanout, spare, fanin, out) = a  # fmt: skip
        tasks, machines = GK.k_place(
            N, A, H, M, FN, FA, DN, DA, GM, CT, cdirty, JT, GT, order, node_role, node_ref, group_role, cursor, used,
            touched, m_node, m_arc, m_free, m_flag, mdirty, gfree, free_list, exact_keys,
        )  # fmt: skip
        out[:] = 0
        if tasks.size:
            update(
                N, A, H, M, FA, DN, DA, GM, CT, cdirty, starved, smask, node_role, node_ref, group_role, ec_role, GT,
                JT, m_free, m_mask, m_arc, m_node, m_slots, m_wasfree, m_flag, m_fpos, mdirty, free_list, freed_buf,
                t_mach, t_arc, arc_pos, pend, m_pend, cmark, fit_pool, scratch, fanout, spare, fanin, 2, out,
            )  # fmt: skip
        return tasks, machines

    return place_update


def _run(monkeypatch, wake, **opts) -> None:
    monkeypatch.setattr(GK, "k_wake", wake)  # the stage-by-stage fallback of CompiledGraph._update calls it too
    update = _stepwise_for(wake)
    monkeypatch.setattr(GK, "k_update", update)
    monkeypatch.setattr(GK, "k_prepare", _prepare_for(update))  # the fused calls take the same steps
    monkeypatch.setattr(GK, "k_place_update", _place_update_for(update))
    for name in ("k_update_packed", "k_prepare_packed", "k_place_update_packed"):  # unpack in Python: they call the
        monkeypatch.setattr(GK, name, getattr(GK, name).py_func)  # step-by-step versions above
    simulate(RunConfig(scheduler="flow", trace="sample:GOOG_subtrace", workers=400, max_jobs=40, options=opts))


@pytest.mark.parametrize("opts", [{}, {"ec_fanin": 2, "ec_fanout": 8}, {"ec_fanin": 0}])
def test_k_wake_matches_the_plain_rule_call_by_call(monkeypatch, opts: dict) -> None:
    calls = {"wake": 0, "kept": 0, "missed": 0}
    compiled_wake = GK.k_wake

    def checked_wake(*args):
        copies = list(args)
        for i in _MUTABLE:
            copies[i] = args[i].copy()
        got = compiled_wake(*args)
        assert got == _reference_wake(*copies)
        copies[7][GK.GM_STAMP] = args[7][GK.GM_STAMP]  # the marking stamp (the reference marks with a set)
        for i in _MUTABLE:
            np.testing.assert_array_equal(args[i], copies[i], err_msg=f"k_wake argument {i}")
        calls["wake"] += 1
        calls["kept"] += int(args[7][GK.GM_NPEND] > 0)
        calls["missed"] += int((args[8][GK.CT_FLAG] & GK.CF_MISSED != 0).any())
        return got

    _run(monkeypatch, checked_wake, **opts)
    assert calls["wake"] > 20 and calls["missed"] > 0
    assert calls["kept"] > 0 or opts.get("ec_fanin") == 0  # (every candidate connects when fanin is 0)


def test_cached_class_urgencies_are_exact(monkeypatch) -> None:
    """With the waiting-cost clock frozen (the default), a class key not marked stale equals a recomputation."""
    checked = {"keys": 0}
    compiled_wake = GK.k_wake

    def wake(*args):
        N, A, H, GM, CT, starved = args[0], args[1], args[2], args[7], args[8], args[9]
        node_role, node_ref, group_role, GT, JT = args[13], args[14], args[15], args[17], args[18]
        for c in starved[: int(GM[GK.GM_NST])].tolist():
            if CT[GK.CT_FLAG, c] & GK.CF_KEYSTALE == 0 and CT[GK.CT_FLAG, c] & GK.CF_STARVED:
                fresh = GK._class_key(N, A, H, node_role, node_ref, group_role, GT, JT, CT[GK.CT_NODE, c])
                assert CT[GK.CT_KEY, c] == fresh
                checked["keys"] += 1
        return compiled_wake(*args)

    _run(monkeypatch, wake)
    assert checked["keys"] > 0
