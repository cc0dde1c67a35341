"""Megha's fidelity profiles and queue disciplines: the fewest-tasks queue, partition orders, state pulls, option
resolution and the trace quirks a profile implies; the starvation remedy (handoff)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.errors import InputError
from megha.runner import simulate
from megha.schedulers import registry
from megha.schedulers.megha import MeghaOptions
from megha.schedulers.megha.fairness import SingleQueue
from megha.schedulers.megha.jobqueue import FewestTasksQueue
from megha.schedulers.megha.messages import LaunchReply, LaunchRequest, StateDelta, StatePull, TaskDone
from tests.test_megha_components import gm, job, lm, requests


def entry(task, job, mask=0):
    return (task, 1.0, mask, None, 0, job)


# --- the fewest-tasks queue --------------------------------------------------------------------------------
def test_fewest_tasks_orders_jobs_by_queued_tasks_then_age():
    q = FewestTasksQueue()
    for t in range(3):
        q.push_back(entry(t, job=0))  # job 0: 3 tasks
    q.push_back(entry(10, job=1))  # job 1: 1 task
    for t in (20, 21, 22):
        q.push_back(entry(t, job=2))  # job 2: 3 tasks, younger than job 0
    assert [e[0] for e in q.in_order()] == [10, 0, 1, 2, 20, 21, 22]
    assert q.pop_fitting(0)[0] == 10
    assert q.pop_fitting(0)[0] == 0  # job 0 now has 2 queued: still first
    q.push_back(entry(30, job=3))
    q.push_back(entry(31, job=3))  # job 3: 2 tasks, as many as job 0, but younger
    assert [e[0] for e in q.in_order()] == [1, 2, 30, 31, 20, 21, 22]
    # a rejected task of job 2 comes back: job 2 (4 queued) stays last; its returned task goes first in the job
    q.push_front(entry(23, job=2))
    assert [e[0] for e in q.in_order()][-4:] == [23, 20, 21, 22]
    # a task of job 3 returns: job 3 has 3 queued now, and goes before job 0? no: job 0 has 2
    q.push_front(entry(32, job=3))
    assert [e[0] for e in q.in_order()] == [1, 2, 32, 30, 31, 23, 20, 21, 22]
    assert len(q) == 9


def test_fewest_tasks_returned_job_goes_first_among_equals():
    q = FewestTasksQueue()
    q.push_back(entry(0, job=0))
    q.push_back(entry(1, job=1))
    q.push_front(entry(2, job=2))  # job 2's task came back from a rejection: first among 1-task jobs
    assert [e[0] for e in q.in_order()] == [2, 0, 1]


def test_fewest_tasks_pop_fitting_skips_jobs_whose_tasks_do_not_fit():
    q = FewestTasksQueue()
    q.push_back(entry(0, job=0, mask=0b100))
    q.push_back(entry(1, job=1, mask=0b001))
    q.push_back(entry(2, job=1, mask=0b011))
    assert q.pop_fitting(0b010) is None  # nothing fits a worker with only constraint 1
    assert q.pop_fitting(0b011)[0] == 1
    assert q.pop_fitting(0b011)[0] == 2
    assert q.pop_fitting(0b011) is None
    assert q.pop_fitting(0b111)[0] == 0
    assert len(q) == 0


def test_drain_places_in_order_and_skips_failed_masks():
    q = FewestTasksQueue()
    for t, m in [(0, 1), (1, 2), (2, 1), (3, 0)]:
        q.push_back(entry(t, job=0, mask=m))
    q.push_back(entry(9, job=1, mask=0))
    tried = []

    def place(e):
        tried.append(e[0])
        return e[2] != 1  # mask 1 never fits

    assert q.drain(place) == 3
    assert tried == [9, 0, 1, 3]  # job 1 first (1 task), then job 0 in order; task 2 skipped (mask 1 failed)
    assert [e[0] for e in q.in_order()] == [0, 2]


def test_fifo_drain_stops_at_first_failure_without_constraints():
    q = SingleQueue()
    for t in range(5):
        q.push_back(entry(t, job=t))
    n = [0]

    def place(e):
        n[0] += 1
        return e[0] < 2

    assert q.drain(place) == 2 and n[0] == 3
    assert [e[0] for e in q.q.entries()] == [2, 3, 4]


@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["back", "front", "pop"]), st.integers(0, 5), st.integers(0, 7)), max_size=120
    )
)
@settings(max_examples=80, deadline=None, derandomize=True)
def test_fewest_tasks_pop_matches_a_naive_model(ops):
    q = FewestTasksQueue()
    model: dict[int, list] = {}  # job -> its tasks in order
    ties: dict[int, int] = {}
    back, front = [0], [0]
    n = 0
    for op, jb, m in ops:
        if op == "pop":
            w = m  # worker mask
            order = sorted(model, key=lambda j: (len(model[j]), ties[j]))
            want = None
            for j in order:
                fits = [e for e in model[j] if e[2] & ~w == 0]
                if fits:
                    want = fits[0]
                    model[j].remove(want)
                    if not model[j]:
                        del model[j], ties[j]
                    break
            assert q.pop_fitting(w) == want
        else:
            n += 1
            e = entry(n, jb, m)
            if jb not in model:
                model[jb] = []
                if op == "back":
                    back[0] += 1
                    ties[jb] = back[0]
            if op == "front":
                front[0] -= 1
                ties[jb] = front[0]
                model[jb].insert(0, e)
                q.push_front(e)
            else:
                model[jb].append(e)
                q.push_back(e)
        assert len(q) == sum(len(v) for v in model.values())


# --- GM and LM behaviour under the profiles' options ------------------------------------------------------------
def test_first_fit_partition_order_always_starts_at_lm0():
    g, port = gm(partition_order="first")
    g.on_message(job([0, 1]), 0.0)
    reqs = requests(port)
    assert [r.workers for r in reqs] == [[0, 1]]  # both on LM0's internal partition (workers 0, 1)
    g.on_message(job([2, 3, 4], j=1), 0.1)
    got = [w for r in requests(port) for w in r.workers]
    assert got[:2] == [4, 5]  # LM1's internal partition next
    assert got[2] in (2, 3)  # then external: LM0 first, partition of GM1
    assert g.counters["repartition_requests"] == 1


def test_random_partition_order_uses_every_internal_partition():
    g, port = gm(partition_order="random")
    seen = set()
    for k in range(40):
        g.on_message(job([k], j=k), float(k))
        (r,) = requests(port)
        seen.add(r.workers[0] // 4)
        g.on_message(TaskDone(r.workers[0] // 4, [k], r.workers, None, r.req), k + 0.5)
    assert seen == {0, 1}


def test_reject_head_does_not_retry_at_once():
    g, port = gm(reject="head")
    g.on_message(job([0]), 0.0)
    (r,) = requests(port)
    g.on_message(LaunchReply(0, r.req, [0], [0], [False], None, r.req), 0.001)
    assert requests(port) == [] and [e[0] for e in g.queue.q.entries()] == [0]


def test_full_pull_after_completion_then_scan_serves_the_queue_in_order():
    g, port = gm(matching="scan", full_pull=True, queue="fewest-tasks", repartition=False)
    g.on_message(job([0, 1, 2, 3]), 0.0)  # fills GM0's internal workers 0, 1, 4, 5
    (r0, r1) = requests(port)
    g.on_message(job([10, 11], j=1), 0.1)
    g.on_message(job([20], j=2), 0.2)
    assert requests(port) == [] and [e[0] for e in g.queue.in_order()] == [20, 10, 11]
    g.on_message(TaskDone(0, [0], [0], None, r0.req), 1.0)
    pulls = port.take(StatePull)
    assert sorted(d for d, _ in pulls) == ["megha/lm0", "megha/lm1"]
    assert requests(port) == []  # the queue is served when every LM has answered
    pid = pulls[0][1].pull
    g.on_message(StateDelta(0, [], [], False, None, r0.req, pid), 1.001)
    assert requests(port) == []
    g.on_message(StateDelta(1, [], [], False, None, r1.req, pid), 1.001)
    (r,) = requests(port)
    assert r.tasks == [20] and r.workers == [0]  # the 1-task job first


def test_lm_answers_a_pull_with_other_gms_changes():
    l0, port = lm()
    l0.on_message(LaunchRequest(1, 1, [5], [0], [1.0], [0]), 0.0)
    port.take()
    l0.on_message(StatePull(0, 7), 0.1)
    ((dst, d),) = port.take(StateDelta)
    assert dst == "megha/gm0" and d.pull == 7 and d.workers == [0] and d.state == [False]
    l0.on_message(StatePull(0, 8), 0.2)
    ((_, d),) = port.take(StateDelta)
    assert d.pull == 8 and d.workers == []


def test_aligned_heartbeats_share_one_grid():
    a, pa = lm(0, phase=0.95)
    b, pb = lm(1, phase=0.95)
    for m, p in ((a, pa), (b, pb)):
        m.on_message(LaunchRequest(1, 1, [5], [m.lo], [1.0], [0]), 2.0)
        ((delay, key),) = p.timers.values()
        assert key == "heartbeat" and delay == pytest.approx(5.95 - 2.0)


# --- options and runs --------------------------------------------------------------------------------------------
def test_profile_sets_unset_options_and_explicit_options_win():
    paper = MeghaOptions()
    assert (paper.queue, paper.heartbeat, paper.trace_quirks) == ("fifo", 5.0, False)
    m20 = MeghaOptions(profile="megha20", heartbeat=10.0)
    assert (m20.queue, m20.route, m20.partition_order, m20.matching, m20.full_pull) == (
        "fewest-tasks",
        "tasks-mod-g",
        "random",
        "scan",
        True,
    )
    assert m20.heartbeat == 10.0
    assert MeghaOptions(profile="iot23").partition_order == "first"
    assert m20.implied_config() == {"truncate_durations": True, "dephase": True}
    assert MeghaOptions(profile="megha20", trace_quirks=False).implied_config() == {}
    spec = registry.get("megha")
    assert set(spec.profiles) == {"paper", "megha20", "iot23"}
    with pytest.raises(InputError):
        registry.parse_options(spec, {"profile": "megha21"})


def test_every_option_is_described():
    for name, f in MeghaOptions.model_fields.items():
        assert f.description, name


SMALL = dict(trace="sample:GOOG_subtrace", max_jobs=150, workers=300, seed=3)


@pytest.mark.parametrize(
    "opts",
    [
        {"profile": "megha20"},
        {"profile": "iot23"},
        {"queue": "fewest-tasks"},
        {"profile": "megha20", "queue": "fifo", "matching": "offer"},
    ],
    ids=["megha20", "iot23", "paper-fewest", "megha20-fifo-offer"],
)
@pytest.mark.parametrize("constraints", [True, False])
def test_profiles_run_every_task_exactly_once(opts, constraints):
    small = dict(SMALL)
    if constraints and opts == {"profile": "megha20"}:  # its default matching: the scan
        # the megha20 profile's constrained scan costs about the square of the prefix (30 jobs 0.8 CPU-s, 60 jobs
        # 4.1, 150 jobs ~140): the first 60 jobs (2,997 tasks, 17 infeasible) check the same exactly-once
        small["max_jobs"] = 60
    r = simulate(RunConfig(scheduler="megha", gms=3, lms=2, constraints=constraints, options=opts, **small))
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()
    if r.options["trace_quirks"]:
        assert r.config.truncate_durations and r.config.dephase
        assert np.array_equal(r.workload.task_duration, np.floor(r.workload.task_duration))
    if r.options["full_pull"]:
        assert r.counters["state_pulls"] > 0


@pytest.mark.parametrize("route", ["round-robin", "tasks-mod-g"])
def test_job_routing(route):
    from megha.metrics.recorder import TaskRecorder
    from megha.model.workload import feasible_tasks
    from megha.runner import load_inputs
    from megha.schedulers.registry import BuildContext
    from megha.sim.engine import Engine

    cfg = RunConfig(scheduler="megha", gms=3, lms=2, **SMALL)
    w, dc = load_inputs(cfg)
    opts = registry.parse_options(registry.get("megha"), {"route": route})
    ctx = BuildContext(
        Engine(), TaskRecorder(w.task_arrival), w, dc, feasible_tasks(w, dc), opts, np.random.default_rng(0), 3, 2
    )
    dep = registry.get("megha").build(ctx)
    for j in range(20):
        want = int(w.job_num_tasks[j]) % 3 if route == "tasks-mod-g" else j % 3
        assert dep.route(j) == f"megha/gm{want}"


@pytest.mark.parametrize("opts", [{"profile": "megha20"}, {"profile": "iot23", "queue": "fewest-tasks"}])
def test_profiles_in_resource_mode(opts):
    cfg = RunConfig(
        scheduler="megha",
        resources=True,
        capacity={"cpu": 4, "mem": 8},
        demand={"cpu": 1, "mem": 1},
        options=opts,
        gms=3,
        lms=2,
        **{**SMALL, "workers": 60, "max_jobs": 60},
    )
    r = simulate(cfg)
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()


def test_fewest_tasks_does_not_combine_with_fairness():
    with pytest.raises(InputError, match="fairness"):
        simulate(RunConfig(scheduler="megha", options={"shares": [0.5, 0.5], "queue": "fewest-tasks"}, **SMALL))


# --- starvation remedy: hand-over of long-waiting rare tasks to an LM ---------------------------------------------
def test_aged_queue_gives_the_oldest_fitting_task():
    from megha.schedulers.megha.handoff import AgedQueue

    q = AgedQueue()
    q.push(30, 1, "young-any", 0b00)
    q.push(10, 2, "old-needs-2", 0b10)
    q.push(20, 3, "mid-needs-1", 0b01)
    q.push(10, 4, "old-needs-1", 0b01)  # ties with an older key of another mask
    assert q.pop_fitting(0b01) == "old-needs-1"
    assert q.pop_fitting(0b01) == "mid-needs-1"
    assert q.pop_fitting(0b01) == "young-any"
    assert q.pop_fitting(0b01) is None and len(q) == 1
    assert q.pop_fitting(0b11) == "old-needs-2"


def test_lm_runs_a_handed_over_task_on_a_free_worker_or_the_next_one_freed():
    from megha.schedulers.common.messages import Finished, Launch
    from megha.schedulers.megha.messages import Handoff

    l0, port = lm()
    # worker 1 (mask 0b11) is busy with GM1's task 5; worker 3 (0b11) is free: a 0b10 task starts on 3 at once
    l0.on_message(LaunchRequest(1, 1, [5], [1], [1.0], [0]), 0.0)
    port.take()
    l0.on_message(Handoff(0, [7], [2.0], [0b10], [0], [0.0]), 1.0)
    ((_, launch),) = port.take(Launch)
    assert launch.tasks == [7] and launch.workers == [3]
    assert l0.pending_for(0) == [1, 3] and l0.pending_for(1) == [3]  # every GM learns worker 3 is busy
    # another 0b10 task waits; when GM1's task on worker 1 ends, the LM gives worker 1 to it first
    l0.on_message(Handoff(0, [8], [2.0], [0b10], [0], [0.5]), 1.1)
    assert port.take(Launch) == []
    l0.on_message(Finished([5], [1]), 2.0)
    ((_, launch),) = port.take(Launch)
    assert launch.tasks == [8] and launch.workers == [1]
    ((dst, done),) = port.take(TaskDone)
    assert dst == "megha/gm1" and done.tasks == [5] and done.reused == [1]
    # the handed-over task stays its GM's: its completion goes to GM0
    l0.on_message(Finished([8], [1]), 4.0)
    ((dst, done),) = port.take(TaskDone)
    assert dst == "megha/gm0" and done.tasks == [8] and not done.reused


def test_gm_hands_over_rare_tasks_that_waited_and_does_not_offer_reused_workers():
    from megha.schedulers.megha.messages import Handoff

    g, port = gm(repartition=False, handoff_after=10.0, handoff_rare=3)
    g.on_message(job([0, 1, 2, 3]), 0.0)  # GM0's internal workers 0, 1, 4, 5 are busy
    (r0, _) = requests(port)
    g.on_message(job([10], masks=[0b10], j=1), 1.0)  # suits workers 1, 3, 6 only: rare
    g.on_message(job([11], j=2), 1.0)  # suits every worker: never handed over
    assert len(g.queue) == 2
    ((delay, key),) = port.timers.values()
    assert key == "handoff" and delay == 2.5
    g.on_timer("handoff", 5.0)
    assert port.take(Handoff) == []  # not waited long enough
    g.on_timer("handoff", 11.5)
    ((dst, h),) = port.take(Handoff)
    assert dst == "megha/lm0" and h.tasks == [10] and h.arrivals == [1.0]  # LM0 has 2 of the 3 suitable workers
    assert [e[0] for e in g.queue.q.entries()] == [11]
    # worker 1 was reused by LM0 for a handed-over task: not offered; worker 0 is
    g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req, [1]), 12.0)
    (r,) = requests(port)
    assert r.tasks == [11] and r.workers == [0]
    assert not g.view.is_free(1)


@pytest.mark.parametrize("in_process", [True, False])
def test_handoff_runs_every_task_exactly_once(in_process):
    opts = {"handoff_after": 5.0, "handoff_rare": 40, "heartbeat": 5.0, "in_process_workers": in_process}
    cfg = RunConfig(scheduler="megha", gms=4, lms=2, options=opts, **{**SMALL, "max_jobs": 60, "workers": 200})
    r = simulate(cfg)
    assert r.unfinished_reason is None
    assert (r.recorder.finishes[r.feasible] == 1).all()
    assert r.counters["handoffs"] > 0 and r.counters["handoff_launches"] == r.counters["handoffs"]


def test_handoff_needs_fifo_offer_slot_mode():
    with pytest.raises(InputError, match="handoff_after"):
        simulate(RunConfig(scheduler="megha", options={"handoff_after": 5.0, "queue": "fewest-tasks"}, **SMALL))
