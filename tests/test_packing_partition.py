"""VQS's universal partition and reduced configurations, checked against the paper's two examples (§VII-A)."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import InputError
from megha.schedulers.packing.partition import ConfigSet, custom_partition, universal_partition
from megha.schedulers.packing.policies import make_policy
from megha.schedulers.packing.slotted import run_slotted
from megha.schedulers.packing.structures import quantize
from megha.schedulers.packing.workloads import synthetic


def test_universal_partition_intervals():
    p = universal_partition(3)
    assert p.n_types == 6  # 2J virtual queues
    assert p.describe() == [
        "(0.6667, 1]",
        "(0.5, 0.6667]",
        "(0.3333, 0.5]",
        "(0.25, 0.3333]",
        "(0.1667, 0.25]",
        "(0, 0.1667]",
    ]
    t = p.type_of_real
    assert [t(1.0), t(0.7), t(2 / 3), t(0.6), t(0.5), t(0.4), t(1 / 3), t(0.3), t(0.2), t(0.15), t(0.01)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
        4,
        5,
        5,
    ]
    assert p.effective(quantize(0.01)) == quantize(1 / 8)  # below 1/2^J: rounded up
    assert p.effective(quantize(0.15)) == quantize(0.15)
    split = universal_partition(3, split_tail=True)
    assert split.n_types == 7 and split.describe()[-1] == "(0, 0.125]"
    with pytest.raises(InputError, match="J must be >= 2"):
        universal_partition(1)
    with pytest.raises(InputError, match="decreasing"):
        custom_partition([0.5, 0.5])


def _configs(J=3):
    cs = ConfigSet(universal_partition(J))
    return cs, {(c.res, c.k_res, c.other, c.k_other) for c in cs.configs}


def test_reduced_configuration_set():
    cs, confs = _configs(3)
    assert cs.res_type == 1  # (1/2, 2/3]
    pure = {(-1, 0, k, n) for k, n in enumerate([1, 1, 2, 3, 4, 6])}
    mixed = {(1, 1, 3, 1), (1, 1, 4, 1), (1, 1, 5, 2)}  # e_(1/2,2/3] + ⌊(1/3)/u_j⌋ e_j, u_j ≤ 1/3
    assert confs == pure | mixed
    assert len(cs) == 4 * 3 - 3
    # max weight: Σ k_j Q_j
    q = [0, 1, 0, 0, 0, 1]
    best = cs.configs[cs.best(q)]
    assert (best.other, best.k_other) == (5, 6)  # 6 small jobs beat one (1/2, 2/3] + 2 small
    q = [0, 9, 0, 0, 0, 1]
    best = cs.configs[cs.best(q)]
    assert (best.res, best.other, best.k_other) == (1, 5, 2)  # 9 + 2·1 = 11 > 9 (pure) and > 6·1
    assert cs.weight(cs.best(q), q) == max(cs.weight(c, q) for c in range(len(cs)))
    assert cs.best([0] * 6) == -1
    pure_only = ConfigSet(universal_partition(3), kind="pure")
    assert len(pure_only) == 6


def test_example_1_vqs_cannot_pair_a_with_b():
    """Fig. 3(a): sizes 0.4 ∈ (1/3,1/2] and 0.6 ∈ (1/2,2/3] fit together, yet no configuration holds both."""
    cs, confs = _configs(4)
    p = cs.partition
    a, b = p.type_of_real(0.4), p.type_of_real(0.6)
    assert quantize(0.4) + quantize(0.6) <= quantize(1.0)
    assert not [c for c in confs if {c[0], c[2]} == {a, b}]
    only_ab = {c for c in confs if {c[0], c[2]} - {-1} <= {a, b}}
    assert only_ab == {(-1, 0, a, 2), (-1, 0, b, 1)}  # "two jobs of size a or one job of size b"


def test_example_2_vqs_serves_five_small_or_two_large():
    """Fig. 3(b): sizes 0.2 ∈ (1/6,1/4] and 0.45 ∈ (1/3,1/2]: 4·e_a by rounding, five a's by real size."""
    cs, confs = _configs(4)
    p = cs.partition
    a, b = p.type_of_real(0.2), p.type_of_real(0.45)
    assert (-1, 0, a, 4) in confs and (-1, 0, b, 2) in confs
    # one server, only a's queued: VQS takes head-of-line a's until none fits: five
    vqs = make_policy("vqs", 1, J=4)
    vqs.arrive(range(8), [quantize(0.2)] * 8)
    assert [s for _, s in vqs.schedule()] == [0] * 5
    # mixed configurations need a (1/2, 2/3] job: with that queue empty they never win
    q = [0] * p.n_types
    q[a], q[b] = 2, 5
    assert cs.configs[cs.best(q)].other == b  # 2·5 > 4·2
    q[a] = 3
    assert cs.configs[cs.best(q)].other == a  # 4·3 > 2·5


def test_example_1_simulated_vqs_unstable_bf_stable():
    wl = synthetic(
        0.17, 40_000, np.random.default_rng(0), sizes=("discrete", [0.4, 0.6], [0.5, 0.5]), service=("geometric", 10)
    )
    q = {n: run_slotted(make_policy(n, 1, J=4), wl).mean_queue() for n in ("vqs", "bf-js", "vqs-bf")}
    assert q["vqs"] > 20 * max(q["bf-js"], q["vqs-bf"])


def test_example_2_simulated_bfjs_unstable_vqs_stable():
    wl = synthetic(
        0.32, 150_000, np.random.default_rng(0), sizes=("discrete", [0.2, 0.45], [2, 1]), service=("fixed", 10)
    )
    res = {n: run_slotted(make_policy(n, 1, J=4), wl) for n in ("vqs", "bf-js")}
    grid = np.array([75_000, 149_999])
    vqs, bfjs = (res[n].sample(grid) for n in ("vqs", "bf-js"))
    assert bfjs[1] > bfjs[0] + 500  # grows
    assert vqs[1] < 200


@pytest.mark.parametrize("kind", ["reduced", "pure"])
@pytest.mark.parametrize("J", [2, 4, 6])
def test_best_lookup_with_one_queue_matches_the_weight_loop(kind, J):
    """The table answer for a single non-empty virtual queue is the first max-weight configuration, as the loop."""
    p = universal_partition(J)
    cs = ConfigSet(p, kind)
    rng = np.random.default_rng(J)
    for t in range(p.n_types):
        for v in (1, 2, 7, 1000):
            q = [0] * p.n_types
            q[t] = v
            assert cs.best(q) == cs._best(q)
    for _ in range(200):
        q = [int(x) for x in rng.integers(0, 4, size=p.n_types) * (rng.random(p.n_types) < 0.3)]
        assert cs.best(q) == cs._best(q)
