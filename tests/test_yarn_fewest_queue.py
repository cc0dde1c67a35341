"""The fewest-tasks queue (``queue=fewest-tasks`` of yarn and oracle): hand-written cases and a random check."""

from __future__ import annotations

import numpy as np
import pytest

from megha.schedulers.common.fewest import FewestTasksQueue


def test_the_job_with_the_fewest_waiting_tasks_goes_first_ties_to_the_older_job():
    q = FewestTasksQueue()
    q.push_job(7, ["a0", "a1", "a2"], [0, 0, 0])
    q.push_job(3, ["b0", "b1"], [0, 0])
    q.push_job(5, ["c0", "c1"], [0, 0])
    assert len(q) == 7
    # b and c both wait with 2 tasks: b was queued first; then b has 1 left and goes on
    assert [q.pop_first_fitting(0) for _ in range(2)] == ["b0", "b1"]
    assert [q.pop_first_fitting(0) for _ in range(2)] == ["c0", "c1"]
    assert [q.pop_first_fitting(0) for _ in range(3)] == ["a0", "a1", "a2"]
    assert q.pop_first_fitting(0) is None and len(q) == 0


def test_only_jobs_with_a_task_the_worker_can_run_compete():
    q = FewestTasksQueue()
    q.push_job(0, ["x"], [0b10])  # needs constraint 1
    q.push_job(1, ["y0", "y1", "y2"], [0b01, 0b00, 0b01])
    assert q.pop_first_fitting(0b01) in ("y0", "y1")  # job 0 does not fit a worker without constraint 1
    assert q.pop_first_fitting(0b11) == "x"  # fewest waiting
    assert q.pop_first_fitting(0b00) in ("y0", "y1")
    assert q.pop_first_fitting(0b00) is None
    assert q.pop_first_fitting(0b01) == "y2"


def test_a_job_queued_again_goes_behind_its_own_tasks_and_its_key_rises():
    q = FewestTasksQueue()
    q.push_job(0, ["a0"], [0])
    q.push_job(1, ["b0", "b1"], [0, 0])
    q.push_job(0, ["a1", "a2"], [0, 0])  # job 0 now waits with 3
    assert q.pop_first_fitting(0) == "b0"


def test_where_variant_skips_entries_that_are_not_accepted():
    q = FewestTasksQueue()
    q.push_job(0, [("a", 4.0)], [0])
    q.push_job(1, [("b", 1.0), ("c", 8.0)], [0, 0])
    assert q.pop_first_fitting_where(0, lambda e: e[1] <= 2.0) == ("b", 1.0)
    assert q.pop_first_fitting_where(0, lambda e: e[1] <= 2.0) is None
    assert q.pop_first_fitting_where(0, lambda e: e[1] <= 5.0) == ("a", 4.0)


@pytest.mark.parametrize("bits", [4, 10])  # 10: hundreds of masks, slots are compacted
def test_random_operations_follow_the_rule(bits):
    """Each pop: the entry fits, its job has the fewest waiting tasks among jobs with a fitting entry (ties: the
    job queued first), and it is the oldest of its job's entries with the same mask."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        q = FewestTasksQueue()
        waiting: dict[int, list[tuple[int, int]]] = {}  # job -> [(seq, mask)]
        first_seen: dict[int, int] = {}
        seq = order = 0
        for _ in range(600):
            if rng.random() < 0.35:
                j = int(rng.integers(0, 40))
                n = int(rng.integers(1, 6))
                hi = 1 << bits
                masks = [int(m) for m in rng.integers(0, hi, size=n) & rng.integers(0, hi, size=n)]
                if j not in waiting:  # the job was not waiting: it is (re)queued now
                    first_seen[j] = order
                    order += 1
                entries = []
                for m in masks:
                    entries.append((j, seq, m))
                    waiting.setdefault(j, []).append((seq, m))
                    seq += 1
                q.push_job(j, entries, masks)
            else:
                wm = int(rng.integers(0, 1 << bits) | rng.integers(0, 1 << bits))
                e = q.pop_first_fitting(wm)
                fitting = {j: es for j, es in waiting.items() if any(m & ~wm == 0 for _, m in es)}
                if not fitting:
                    assert e is None
                    continue
                assert e is not None
                j, s, m = e
                assert m & ~wm == 0
                best = min(fitting, key=lambda k: (len(waiting[k]), first_seen[k]))
                assert j == best
                assert s == min(x for x, mm in waiting[j] if mm == m)
                waiting[j].remove((s, m))
                if not waiting[j]:
                    del waiting[j]
            assert len(q) == sum(len(v) for v in waiting.values())
