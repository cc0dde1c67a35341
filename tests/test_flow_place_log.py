"""The flow log: the arcs whose flow the solver set or moved, which the placement kernel reads instead of every
machine's sink arc (``K._log_flow``, ``GK.k_place``).

Its bookkeeping is checked on a hand-built network (every arc an augmentation or a repair gave flow is listed) and
in whole simulations: before every placement, each machine carrying flow must be found through the log (or the
arcs edited since the last solve), and runs that drop the log before every placement (so each one scans every
machine) must place every task alike.
"""

from __future__ import annotations

import numpy as np

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.runner import simulate
from megha.schedulers.flow import _graph_kernels as GK
from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow import compiled as C
from megha.schedulers.flow.network import FlowNetwork
from megha.schedulers.flow.solvers import IncrementalSolver


def _logged(net: FlowNetwork) -> set[int]:
    n = int(net.M[K.M_NTL])
    assert n >= 0, "the log was dropped"
    return {int(a) for a in net.M[K.MF : K.MF + n]}


def _with_flow(net: FlowNetwork) -> set[int]:
    return {int(a) for a in net.alive_arcs() if net.flows([a])[0] > 0}


def test_the_log_lists_every_arc_a_solve_gave_flow() -> None:
    net = FlowNetwork(balance_node=None)
    s, m1, m2, t = (int(v) for v in net.add_nodes([3, 0, 0, -3]))
    arcs = net.add_arcs([s, s, m1, m2], [m1, m2, t, t], [1, 2, 0, 0], [2, 3, 2, 3])
    sol = IncrementalSolver()
    sol.solve_quick(net)
    assert _with_flow(net) == {int(a) for a in arcs}
    assert _with_flow(net) <= _logged(net)
    # a new reader's log: empty; a bound cut on m1's sink arc moves flow to m2 (a repair, then a search)
    net.M[K.M_NTL] = 0
    net.set_bounds(arcs[2:3], [0], [0])
    sol.solve_quick(net)
    assert net.flows(arcs[3:4])[0] == 3
    assert {int(arcs[1]), int(arcs[3])} <= _logged(net)
    assert _with_flow(net) <= _logged(net)


def test_a_full_log_is_dropped_and_written_flows_drop_it() -> None:
    net = FlowNetwork(balance_node=None)
    M = net.M
    M[K.M_NTL] = M.size - K.MF - 1
    K._log_flow(M, 7)
    assert M[K.M_NTL] == M.size - K.MF and M[-1] == 7
    K._log_flow(M, 8)
    assert M[K.M_NTL] == -1
    K._log_flow(M, 9)
    assert M[K.M_NTL] == -1
    M[K.M_NTL] = 0
    s, t = (int(v) for v in net.add_nodes([1, -1]))
    a = net.add_arcs([s], [t], [0], [1])
    net.write_flows(a, np.array([1]), "elsewhere")
    assert M[K.M_NTL] == -1


def _run(opts: dict, check: bool, drop: bool) -> tuple[str, list[int]]:
    """A small overloaded run; before each placement, check the log covers every machine carrying flow and/or
    drop it (the placement then scans every free machine). Returns the fingerprint and per-check counts."""
    seen = [0, 0]
    orig = C.CompiledGraph.place_pass

    def place_pass(self: C.CompiledGraph):  # type: ignore[no-untyped-def]
        net = self.net
        if check and net.M[K.M_NTL] >= 0:
            ma = self.machine_arc
            f = net.A[K.A_FLOW, ma] + net.A[K.A_LOW, ma]
            carrying = {int(m) for m in np.flatnonzero(f > 0)}
            listed = set(_logged(net)) | {int(a) for a in net.DA[: int(net.M[K.M_NDA])]}
            reach = {m for m in carrying if int(ma[m]) in listed}
            assert reach == carrying, f"machines carrying flow missing from the log: {sorted(carrying - reach)}"
            seen[0] += 1
            seen[1] += len(carrying)
        if drop:
            net.forget_flow_log()
        return orig(self)

    C.CompiledGraph.place_pass = place_pass  # type: ignore[method-assign]
    try:
        cfg = RunConfig(scheduler="flow", trace="sample:GOOG_subtrace", workers=200, max_jobs=40, options=opts)
        fp = fingerprint(simulate(cfg))
    finally:
        C.CompiledGraph.place_pass = orig  # type: ignore[method-assign]
    return fp, seen


def test_every_machine_carrying_flow_is_in_the_log_and_the_placements_match_a_full_scan() -> None:
    for opts in ({}, {"ec_fanout": 4}):
        fp, seen = _run(opts, check=True, drop=False)
        assert seen[0] > 0 and seen[1] > 0  # placements happened through the log
        fp_full, _ = _run(opts, check=False, drop=True)
        assert fp == fp_full


def test_the_place_kernel_reads_the_log_instead_of_every_machine() -> None:
    graphs: list[C.CompiledGraph] = []
    orig = C.CompiledGraph.__init__

    def init(self: C.CompiledGraph, *a, **k) -> None:  # type: ignore[no-untyped-def]
        orig(self, *a, **k)
        graphs.append(self)

    C.CompiledGraph.__init__ = init  # type: ignore[method-assign]
    try:
        simulate(RunConfig(scheduler="flow", trace="sample:GOOG_subtrace", workers=200, max_jobs=40))
    finally:
        C.CompiledGraph.__init__ = orig  # type: ignore[method-assign]
    (g,) = graphs
    assert g.GM[GK.GM_PLOG] > 0
