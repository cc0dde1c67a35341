"""Megha's MaskQueue gives the same answers as the shared WaitQueue (it only swaps the first-fit kernel)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from megha.model.matching import WaitQueue
from megha.schedulers.megha.fairness import MaskQueue

mask_st = st.integers(0, 15)  # few constraint bits: many masks collide, many fit
op_st = st.one_of(
    st.tuples(st.just("back"), mask_st),
    st.tuples(st.just("front"), mask_st),
    st.tuples(st.just("fit"), mask_st),
    st.tuples(st.just("inv"), mask_st),
    st.tuples(st.just("pop"), st.just(0)),
)


@given(ops=st.lists(op_st, max_size=300))
@settings(max_examples=150, deadline=None)
def test_mask_queue_matches_wait_queue(ops):
    a, b = WaitQueue(), MaskQueue()
    for i, (op, m) in enumerate(ops):
        if op == "back":
            a.push_back((i, m), m)
            b.push_back((i, m), m)
        elif op == "front":
            a.push_front((i, m), m)
            b.push_front((i, m), m)
        elif op == "fit":
            assert a.pop_first_fitting(m) == b.pop_first_fitting(m)
        elif op == "inv":
            inv = ~m & 0xFFFFFFFF
            assert a.pop_first_fitting_inv(inv) == b.pop_first_fitting_inv(inv)
        else:
            assert a.pop_front() == b.pop_front()
        assert len(a) == len(b)
    assert a.entries() == b.entries()


def test_mask_queue_many_masks_compaction():
    a, b = WaitQueue(), MaskQueue()
    for i in range(3000):
        m = (i * 2654435761) & 0x1FFFFF
        a.push_back(i, m)
        b.push_back(i, m)
    for w in range(0, 1 << 21, 997):
        assert a.pop_first_fitting(w) == b.pop_first_fitting(w)
    assert a.entries() == b.entries()


def test_pop_heads_takes_one_task_per_mask_and_unpop_restores_the_order():
    import numpy as np

    from megha.schedulers.megha.fairness import MaskQueue

    q = MaskQueue()
    for i, m in enumerate([1, 1, 1, 2, 1, 4, 2]):
        q.push_back(("t", i), m)
    items = q.pop_heads(2)
    assert [(m, e[1]) for _, m, e in items] == [(1, 0), (2, 3)]
    assert [e[1] for e in q.entries()] == [1, 2, 4, 5, 6]
    q.push_front(("t", -1), 1)  # something else went back to the head in between
    q.unpop(items)
    assert [e[1] for e in q.entries()] == [-1, 0, 1, 2, 3, 4, 5, 6]
    # only masks that one of the given workers satisfies: worker 0b100 suits mask 4, worker 0b011 masks 1 and 2
    got = q.pop_heads_fitting_any(np.array([0b100], dtype=np.uint32), 3)
    assert [e[1] for _, _, e in got] == [5]
    got = q.pop_heads_fitting_any(np.array([0b011], dtype=np.uint32), 3)
    assert [e[1] for _, _, e in got] == [-1, 3]
