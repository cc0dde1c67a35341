"""The megha20 profile's job queue (``queue=fewest-remaining``): jobs by fewest unfinished tasks, the order refreshed
only when a job joins the queue, as the 2020 authors' simulator sorts its list."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.runner import simulate
from megha.schedulers.megha import MeghaOptions
from megha.schedulers.megha.messages import StateDelta, StatePull, TaskDone
from megha.schedulers.megha.remaining import FewestRemainingQueue
from tests.test_megha_components import gm, job, requests


def entry(task, job, mask=0):
    return (task, 1.0, mask, None, 0, job)


def order(q):
    return [e[0] for e in q.in_order()]


def test_a_placed_task_keeps_counting_until_it_finishes():
    q = FewestRemainingQueue()
    for t in range(3):
        q.push_back(entry(t, job=0))  # job 0: 3 tasks
    assert q.pop_fitting(0)[0] == 0 and q.pop_fitting(0)[0] == 1  # two placed: 1 queued, 3 unfinished
    q.push_back(entry(10, job=1))
    q.push_back(entry(11, job=1))  # job 1: 2 tasks, fewer than job 0's 3 unfinished
    assert order(q) == [10, 11, 2]
    q.finished([0, 1])  # job 0 down to 1 unfinished task, but the order is only refreshed by an insertion
    assert order(q) == [10, 11, 2]
    q.push_back(entry(20, job=2))
    q.push_back(entry(21, job=2))
    q.push_back(entry(22, job=2))  # a job joins: the queue is re-sorted with the current counts
    assert order(q) == [2, 10, 11, 20, 21, 22]


def test_ties_go_to_the_earlier_job_and_a_returned_job_goes_first():
    q = FewestRemainingQueue()
    q.push_back(entry(0, job=0))
    q.push_back(entry(1, job=1))
    assert order(q) == [0, 1]
    assert q.pop_fitting(0)[0] == 0  # job 0 leaves the queue (its task is placed)
    q.push_front(entry(0, job=0))  # rejected: job 0 comes back, first among the 1-task jobs
    assert order(q) == [0, 1]
    q.push_back(entry(5, job=5))
    assert order(q) == [0, 1, 5]


def test_a_rejected_task_of_a_queued_job_does_not_move_it():
    q = FewestRemainingQueue()
    for t in range(3):
        q.push_back(entry(t, job=0))
    assert q.pop_fitting(0)[0] == 0
    q.push_back(entry(10, job=1))
    q.push_back(entry(11, job=1))
    q.push_back(entry(12, job=1))  # job 1: 3 unfinished, as many as job 0: job 0 (earlier) first
    assert order(q) == [1, 2, 10, 11, 12]
    q.push_front(entry(0, job=0))  # job 0's placed task rejected: still 3 unfinished, same place
    assert order(q) == [0, 1, 2, 10, 11, 12]
    assert len(q) == 6


def test_drain_keeps_the_order_and_records_placed_tasks():
    q = FewestRemainingQueue()
    for t in range(4):
        q.push_back(entry(t, job=0))
    q.push_back(entry(9, job=1))
    placed = []

    def place(e):
        if len(placed) < 3:
            placed.append(e[0])
            return True
        return False

    assert q.drain(place) == 3
    assert placed == [9, 0, 1] and order(q) == [2, 3]
    q.finished([9, 0, 1])  # the finished tasks are known placed ones
    q.push_back(entry(30, job=3))
    q.push_back(entry(31, job=3))
    q.push_back(entry(32, job=3))
    assert order(q) == [2, 3, 30, 31, 32]  # job 0: 2 unfinished now, job 3: 3


@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["job", "pop", "reject", "finish"]), st.integers(0, 5), st.integers(1, 4)),
        max_size=80,
    )
)
@settings(max_examples=80, deadline=None, derandomize=True)
def test_matches_a_list_sorted_on_insertion(ops):
    """A model of the reference: a list of jobs, stably sorted by unfinished tasks when a job is inserted."""
    q = FewestRemainingQueue()
    jobs: list[int] = []  # the reference's job_queue
    queued: dict[int, list[int]] = {}
    unfinished: dict[int, int] = {}
    placed: list[tuple[int, int]] = []  # (task, job) placed, not finished
    n = 0

    def resort():
        jobs.sort(key=lambda j: unfinished[j])

    for op, jb, k in ops:
        if op == "job" and jb not in unfinished:
            tasks = list(range(n, n + k))
            n += k
            unfinished[jb] = k
            queued[jb] = tasks
            jobs.append(jb)
            resort()
            for t in tasks:
                q.push_back(entry(t, jb))
        elif op == "pop" and jobs:
            j = jobs[0]
            t = queued[j].pop(0)
            if not queued[j]:
                jobs.pop(0)
            placed.append((t, j))
            assert q.pop_fitting(0) == entry(t, j)
        elif op == "reject" and placed:
            t, j = placed.pop(k % len(placed))
            if j not in jobs:
                jobs.insert(0, j)
                resort()
            queued.setdefault(j, []).insert(0, t)
            q.push_front(entry(t, j))
        elif op == "finish" and placed:
            t, j = placed.pop(k % len(placed))
            unfinished[j] -= 1
            if not unfinished[j]:
                del unfinished[j]
            q.finished([t])
        assert order(q) == [t for j in jobs for t in queued[j]]


def test_the_gm_counts_a_completion_against_its_job():
    opts = MeghaOptions(profile="megha20", queue="fewest-remaining")
    g, port = gm(matching="scan", full_pull=opts.full_pull, queue=opts.queue, repartition=False)
    g.on_message(job([0, 1, 2, 3, 4, 5]), 0.0)  # GM0 has 4 internal workers: 2 tasks of job 0 wait
    (r0, r1) = requests(port)
    g.on_message(job([10, 11, 12], j=1), 0.1)  # 3 unfinished < 6: job 1 goes first
    assert [e[0] for e in g.queue.in_order()] == [10, 11, 12, 4, 5]
    g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req), 1.0)
    g.on_message(TaskDone(1, [2, 3], [4, 5], None, r1.req), 1.0)
    assert g.queue._unfinished[0] == 2
    pid = port.take(StatePull)[-1][1].pull
    for lm_ in (0, 1):
        g.on_message(StateDelta(lm_, [], [], False, None, (r0 if lm_ == 0 else r1).req, pid), 1.001)
    served = sorted(t for r in requests(port) for t in r.tasks)
    assert served == [4, 10, 11, 12]  # the order was not refreshed by the completions (else job 0's 4, 5 first)


@pytest.mark.parametrize("constraints", [True, False])
@pytest.mark.parametrize("matching", ["scan", "offer"])
def test_runs_every_task_exactly_once(constraints, matching):
    opts = {"profile": "megha20", "queue": "fewest-remaining", "matching": matching}
    cfg = RunConfig(
        scheduler="megha",
        gms=3,
        lms=2,
        constraints=constraints,
        options=opts,
        trace="sample:GOOG_subtrace",
        # the constrained scan's cost grows about with the square of the prefix (30 jobs 0.8 CPU-s, 60 jobs 4.1,
        # 150 jobs ~140): its first 60 jobs (2,997 tasks, 17 infeasible) check the same, the rest keep 150
        max_jobs=60 if constraints and matching == "scan" else 150,
        workers=300,
        seed=3,
    )
    r = simulate(cfg)
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()


def test_runs_in_resource_mode():
    cfg = RunConfig(
        scheduler="megha",
        resources=True,
        capacity={"cpu": 4, "mem": 8},
        demand={"cpu": 1, "mem": 1},
        options={"profile": "megha20", "queue": "fewest-remaining"},
        gms=3,
        lms=2,
        trace="sample:GOOG_subtrace",
        max_jobs=60,
        workers=60,
        seed=3,
    )
    r = simulate(cfg)
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()
