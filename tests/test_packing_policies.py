"""Each packing policy on hand-made slots: which job goes where."""

from __future__ import annotations

import pytest

from megha.errors import InputError
from megha.schedulers.packing.policies import make_policy
from megha.schedulers.packing.structures import UNIT, Constraints, quantize


class Harness:
    """Drives a policy slot by slot with sizes in (0, 1] and departures by job id."""

    def __init__(self, name: str, n: int, **kw) -> None:
        self.p = make_policy(name, n, **kw)
        self.next = 0
        self.where: dict[int, int] = {}

    def slot(self, arrive=(), depart=()):
        for j in depart:
            self.p.depart(j, self.where.pop(j))
        ids = list(range(self.next, self.next + len(arrive)))
        self.next += len(arrive)
        if ids:
            self.p.arrive(ids, [quantize(x) for x in arrive])
        out = self.p.schedule()
        self.where.update(out)
        return out

    def residuals(self):
        return [round(self.p.residual(s) / UNIT, 6) for s in range(self.p.n)]


def test_fifo_ff_first_fit_and_head_of_line_blocking():
    h = Harness("fifo-ff", 3)
    assert h.slot([0.5, 0.6, 0.3, 0.7]) == [(0, 0), (1, 1), (2, 0), (3, 2)]
    assert h.slot([0.9, 0.1]) == []  # the head fits nowhere; 0.1 waits behind it
    assert h.p.queue_len() == 2
    assert h.slot() == []
    assert h.slot(depart=[1]) == [(4, 1), (5, 0)]  # head to the freed server, then first fit


def test_bf_j_tightest_server_in_arrival_order():
    h = Harness("bf-j", 3)
    assert h.slot([0.5, 0.7, 0.2]) == [(0, 0), (1, 1), (2, 1)]
    assert h.residuals() == [0.5, 0.1, 1.0]
    assert h.slot([0.4, 0.6, 0.05]) == [(3, 0), (4, 2), (5, 0)]  # 0.05: tie of 0.1 residuals → lowest id
    assert h.slot([0.9, 0.3]) == [(7, 2)]  # 0.9 waits, the later 0.3 goes on
    assert h.slot(depart=[4]) == []  # 0.7 free: still not enough for 0.9
    assert h.slot(depart=[7]) == [(6, 2)]


def test_bf_j_and_bf_s_differ_on_order_vs_size():
    for name, want in (("bf-j", 2), ("bf-s", 1)):
        h = Harness(name, 1)
        assert h.slot([0.7]) == [(0, 0)]
        h.slot([0.5])  # job 1 waits (0.3 free)
        h.slot([0.45, 0.6])  # jobs 2, 3 wait
        out = h.slot(depart=[0])  # 1.0 free: BF-J takes the oldest fitting (0.5, 0.45), BF-S the largest (0.6)
        assert out[0] == ((1, 0) if name == "bf-j" else (3, 0))
        assert len(out) == want


def test_bf_s_fills_servers_in_index_order_with_largest_jobs():
    h = Harness("bf-s", 2)
    assert h.slot([0.3, 0.5, 0.4, 0.8]) == [(3, 0), (1, 1), (2, 1)]
    assert h.p.queue_len() == 1


def test_bf_js_departed_servers_then_new_jobs():
    h = Harness("bf-js", 3)
    assert h.slot([0.6, 0.6, 0.6]) == [(0, 0), (1, 1), (2, 2)]
    assert h.slot([0.5, 0.3]) == [(4, 0)]  # BF-J: 0.5 fits nowhere, 0.3 to the tightest (tie → s0)
    # s1 empties: BF-S on s1 takes the largest queued jobs, old (0.5) and new (0.45) alike
    assert h.slot([0.45], depart=[1]) == [(3, 1), (5, 1)]
    assert h.slot([0.35]) == [(6, 2)]  # BF-J on the new job: tightest server with room (s2: 0.4)
    assert h.residuals() == [0.1, 0.05, 0.05]


def test_vqs_configurations_and_head_of_line():
    h = Harness("vqs", 2, J=3)
    # Q_(1/2,2/3] = 1, Q_(0,1/6] = 4: s0 picks 6·e_small (weight 24), small jobs occupy 1/8 each (rounded up)
    out = h.slot([0.6, 0.1, 0.1, 0.1, 0.1])
    assert out == [(1, 0), (2, 0), (3, 0), (4, 0), (0, 1)]
    assert h.residuals() == [0.5, 0.4]
    assert h.slot([0.3, 0.1]) == [(6, 0)]  # 0.3's type has no server configured for it
    assert h.slot(depart=[0]) == [(5, 1)]  # s1 empties and renews to 3·e_(1/4,1/3]


def test_vqs_mixed_configuration_reserves_two_thirds():
    h = Harness("vqs", 1, J=3)
    # Q_(1/2,2/3] = 7, Q_(1/6,1/4] = 2: e_r + 1·e_(1/6,1/4] has weight 9 > 8 (4·e) > 7
    out = h.slot([0.55] * 7 + [0.2, 0.2])
    assert out == [(0, 0), (7, 0)]  # the second 0.2 does not fit the unreserved third
    assert h.slot(depart=[0]) == [(1, 0)]  # the reserved slot is refilled from its queue
    assert h.slot(depart=[7]) == [(8, 0)]


def test_vqs_bf_largest_first_then_best_fit():
    h = Harness("vqs-bf", 1, J=3)
    out = h.slot([0.55] * 7 + [0.2, 0.2])
    assert out == [(0, 0), (7, 0), (8, 0)]  # the configuration, then BF-S packs the second 0.2
    for name, want in (("vqs", [(0, 0), (1, 0), (2, 0)]), ("vqs-bf", [(1, 0), (2, 0), (3, 0)])):
        h = Harness(name, 1, J=3)
        assert h.slot([0.26, 0.33, 0.32, 0.3]) == want  # head-of-line vs largest first in (1/4, 1/3]


def test_constraints_are_honoured():
    for name in ("fifo-ff", "bf-j", "bf-s", "bf-js", "vqs", "vqs-bf"):
        cons = Constraints([0b00, 0b01])
        p = make_policy(name, 2, cons)
        cons.set([0, 1], [0b01, 0b00])
        p.arrive([0, 1], [quantize(0.7), quantize(0.2)])
        out = dict(p.schedule())
        assert out[0] == 1, name  # job 0 needs constraint 0, only server 1 has it
        # the same with a plain predicate (scanning fallback)
        p = make_policy(name, 2, lambda j, s: j != 0 or s == 1)
        p.arrive([0, 1], [quantize(0.7), quantize(0.2)])
        assert dict(p.schedule())[0] == 1, name


def test_unknown_policy_and_vector_vqs_rejected():
    with pytest.raises(InputError, match="unknown packing policy"):
        make_policy("best-fit", 2)
    with pytest.raises(InputError, match="only available for the Best-Fit family"):
        make_policy("vqs", 2, vector=2)
    with pytest.raises(InputError, match="at least one server"):
        make_policy("bf-js", 0)


def test_tetris_vector_policy_prefers_aligned_server():
    p = make_policy("bf-j", 2, vector=2)
    p.arrive([0, 1], [(UNIT // 2, UNIT // 10), (UNIT // 10, UNIT // 2)])
    assert p.schedule() == [(0, 0), (1, 0)]  # both fit s0; after the first, s0 is the best-aligned server
    p.arrive([2], [(UNIT // 2, UNIT // 20)])  # fits only s1
    assert p.schedule() == [(2, 1)]
    p.arrive([3], [(UNIT // 10, UNIT // 10)])  # alignment with s0 (0.6, 0.6) beats s1 (0.5, 0.05)
    assert p.schedule() == [(3, 0)]


def test_tetris_differs_from_max_reduction():
    """A memory job goes to the server busy in memory, not to the one with least max-residual."""
    sizes = [(0.7, 0.001), (0.4, 0.4), (0.001, 0.3)]
    p = make_policy("bf-j", 2, vector=2)
    for j, x in enumerate(sizes):
        p.arrive([j], [tuple(quantize(v) for v in x)])
        p.schedule()
    scalar = make_policy("bf-j", 2)
    for j, x in enumerate(sizes):
        scalar.arrive([j], [quantize(max(x))])
        scalar.schedule()
    assert [p.residual(1)[1], scalar.residual(0)] == [
        UNIT - quantize(0.4) - quantize(0.3),
        UNIT - quantize(0.7) - quantize(0.3),
    ]
