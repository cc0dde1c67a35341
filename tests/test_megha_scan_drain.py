"""``matching=scan`` drains told which queued masks cannot fit (``fits``): the same placements in the same order as
a drain that offers every task, for every queue kind (FIFO, fewest queued tasks, fewest unfinished tasks)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.schedulers.megha.fairness import SingleQueue
from megha.schedulers.megha.jobqueue import FewestTasksQueue
from megha.schedulers.megha.remaining import FewestRemainingQueue

INF = np.iinfo(np.int64).max
QUEUES = [SingleQueue, FewestTasksQueue, FewestRemainingQueue]


class Pool:
    """Free workers by constraint mask; a task takes the first free worker that has all of its constraints."""

    def __init__(self, worker_masks: list[int]) -> None:
        self.free = list(worker_masks)
        self.offers = 0

    def place(self, e: tuple) -> bool:
        self.offers += 1
        for i, w in enumerate(self.free):
            if e[2] & ~w == 0:
                del self.free[i]
                return True
        return False

    def fits(self, masks: np.ndarray, heads: np.ndarray, n: int) -> tuple[set, set]:
        live = [int(m) for m, h in zip(masks[:n].tolist(), heads[:n].tolist(), strict=True) if h != INF]
        ok = {m for m in live if any(m & ~w == 0 for w in self.free)}
        return set(live) - ok, ok


def build(kind: type, ops: list[tuple[int, int, bool]]) -> object:
    q = kind()
    for task, (job, mask, front) in enumerate(ops):
        e = (task, 1.0, mask, None, 0, job)
        (q.push_front if front else q.push_back)(e)
    return q


def queued(q: object) -> list[int]:
    """Task ids in queue order."""
    entries = q.in_order() if hasattr(q, "in_order") else q.q.entries()
    return [e[0] for e in entries]


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 15), st.booleans()), max_size=60),
    workers=st.lists(st.integers(0, 15), max_size=12),
    kind=st.sampled_from(QUEUES),
)
def test_a_drain_told_the_hopeless_masks_places_the_same_tasks_in_the_same_order(ops, workers, kind):
    plain_q, told_q = build(kind, ops), build(kind, ops)
    plain, told = Pool(workers), Pool(workers)
    placed_plain: list[int] = []
    placed_told: list[int] = []

    def via(pool: Pool, out: list[int]):
        def place(e: tuple) -> bool:
            if pool.place(e):
                out.append(e[0])
                return True
            return False

        return place

    n_plain = plain_q.drain(via(plain, placed_plain))
    n_told = told_q.drain(via(told, placed_told), None, told.fits)
    assert n_plain == n_told == len(placed_plain)
    assert placed_told == placed_plain and told.free == plain.free
    assert queued(told_q) == queued(plain_q)
    assert told.offers <= plain.offers


def test_a_long_queue_of_hopeless_masks_is_not_offered_at_all():
    q = build(FewestTasksQueue, [(job, 1 + job % 7, False) for job in range(200)])
    pool = Pool([0, 0, 0])  # three free workers without any constraint: no queued task fits
    assert q.drain(pool.place, None, pool.fits) == 0 and pool.offers == 0
    pool = Pool([1])  # fits mask 1 (jobs 0, 7, 14, ...): job 0's task is placed, job 7's offered in vain
    assert q.drain(pool.place, None, pool.fits) == 1 and pool.offers == 2
