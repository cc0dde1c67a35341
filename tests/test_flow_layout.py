"""Memory layout of the flow network's tables and of the solver's heap: a layout changes where values sit, never
which values the kernels compute."""

from __future__ import annotations

import numpy as np

from megha.schedulers.flow import _kernels as K
from megha.schedulers.flow.network import FlowNetwork
from megha.schedulers.flow.solvers import IncrementalSolver


def _random_ops(seed: int, n_ops: int) -> list[tuple[int, int, int]]:
    """Pushes (distance, tie, node) and pops (−1), with many equal keys so the tie order matters."""
    rng = np.random.default_rng(seed)
    ops = []
    size = 0
    for i in range(n_ops):
        if size and rng.random() < 0.4:
            ops.append((-1, 0, 0))
            size -= 1
        else:
            ops.append((int(rng.integers(0, 6)), int(rng.integers(0, 3)), i))
            size += 1
    return ops


def _push3arrays(hd, ht, hv, n, d, t, v):
    """The reference: the same binary heap kept in three arrays (distance, tie, node), as the solver kept it before
    its entries were stored flat."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if hd[p] < d or (hd[p] == d and ht[p] <= t):
            break
        hd[i], ht[i], hv[i] = hd[p], ht[p], hv[p]
        i = p
    hd[i], ht[i], hv[i] = d, t, v
    return n + 1


def _pop3arrays(hd, ht, hv, n):
    """Remove the reference heap's root; returns the new size."""
    n -= 1
    if n == 0:
        return 0
    d, t, v = hd[n], ht[n], hv[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (hd[c + 1] < hd[c] or (hd[c + 1] == hd[c] and ht[c + 1] < ht[c])):
            c += 1
        if hd[c] > d or (hd[c] == d and ht[c] >= t):
            break
        hd[i], ht[i], hv[i] = hd[c], ht[c], hv[c]
        i = c
    hd[i], ht[i], hv[i] = d, t, v
    return n


def test_flat_heap_pops_in_the_same_order_as_the_three_array_heap() -> None:
    for seed in range(5):
        ops = _random_ops(seed, 400)
        hd = np.zeros(400, dtype=np.int64)
        ht = np.zeros(400, dtype=np.int64)
        hv = np.zeros(400, dtype=np.int64)
        hp = np.zeros(3 * 400, dtype=np.int64)
        n = m = 0
        for d, t, v in ops:
            if d < 0:
                assert (hd[0], ht[0], hv[0]) == (hp[0], hp[1], hp[2])
                n = _pop3arrays(hd, ht, hv, n)
                m = K._hpop3(hp, m)
            else:
                n = _push3arrays(hd, ht, hv, n, d, t, v)
                m = K._hpush3(hp, m, d, t, v)
            assert n == m
            assert np.array_equal(hp[: 3 * m].reshape(m, 3), np.stack((hd[:n], ht[:n], hv[:n]), axis=1))


def _grid(net: FlowNetwork) -> None:
    """A small transport problem with ties: 6 sources of 2 units, 4 sinks of −3, equal costs on many arcs."""
    src = net.add_nodes(np.full(6, 2))
    dst = net.add_nodes(np.full(4, -3))
    tails, heads, costs = [], [], []
    for i, s in enumerate(src.tolist()):
        for j, t in enumerate(dst.tolist()):
            tails.append(s)
            heads.append(t)
            costs.append((i + j) % 3)
    net.add_arcs(tails, heads, costs, np.full(len(tails), 2))


def _solve(net: FlowNetwork, hd: np.ndarray) -> int:
    n = net.node_capacity
    hv = np.zeros(1, dtype=np.int64)
    settled = np.zeros(n + 1, dtype=np.int64)
    active = np.zeros(n + 1, dtype=np.int64)
    return int(K.k_solve(net.N, net.A, net.H, net.M, net.DN, net.DA, hd, hv, settled, active, 0, K.TIE_DEGREE))


def test_k_solve_gives_the_same_flow_with_its_own_heap_buffer_and_with_the_networks() -> None:
    a = FlowNetwork(balance_node=None)
    b = FlowNetwork(balance_node=None)
    _grid(a)
    _grid(b)
    assert _solve(a, np.zeros(3, dtype=np.int64)) == 0  # too short: a heap buffer for the call
    assert _solve(b, b.search_heap()) == 0
    arcs = a.alive_arcs()
    assert np.array_equal(a.flows(arcs), b.flows(arcs))
    assert np.array_equal(a.potentials(a.alive_nodes()), b.potentials(b.alive_nodes()))
    assert a.stats() == b.stats()
    a.check()
    b.check()


def test_solve_quick_installs_the_same_flow_as_solve() -> None:
    a = FlowNetwork(balance_node=None)
    b = FlowNetwork(balance_node=None)
    _grid(a)
    _grid(b)
    assert IncrementalSolver().solve(a).optimal
    assert IncrementalSolver().solve_quick(b) >= 0
    arcs = a.alive_arcs()
    assert np.array_equal(a.flows(arcs), b.flows(arcs))
    assert a.stats() == b.stats()


def test_node_and_arc_tables_stay_column_major_when_they_grow() -> None:
    net = FlowNetwork(node_capacity=16, arc_capacity=16, balance_node=None)
    nodes = net.add_nodes(np.zeros(100, dtype=np.int64))
    net.add_arcs(nodes[:-1], nodes[1:], np.ones(99, dtype=np.int64), np.full(99, 5))
    assert net.node_capacity >= 100 and net.arc_capacity >= 99
    assert net.N.flags.f_contiguous and net.A.flags.f_contiguous
    assert net.H.flags.c_contiguous
    assert net.search_heap().size >= 3 * (2 * net.arc_capacity + 2)
