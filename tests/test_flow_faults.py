"""The flow scheduler under machine failures: a dead machine leaves the graph, its tasks are lost and placed again,
the machine comes back empty; launches that reach a dead machine fail and their tasks wait again."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.metrics.recorder import TaskRecorder
from megha.metrics.report import summarize
from megha.model.topology import Datacenter
from megha.runner import simulate
from megha.schedulers.common.messages import Finished, JobArrival, Launch, LaunchFailed
from megha.schedulers.common.workers import WorkerPool
from megha.schedulers.flow import FlowOptions, build_scheduler
from megha.schedulers.flow import _graph_kernels as GK
from megha.schedulers.flow.faults import FlowFaults
from megha.sim.component import RecordingPort
from tests.test_conformance import check, config
from tests.test_faults_run import assert_no_run_on_a_dead_worker, assert_stranded_tasks_have_no_live_worker
from tests.tracegen import write_trace

GRAPHS = [
    {},  # compiled graph
    {"interval": 0},  # reference graph
    {"interval": 0, "preemption": True, "verify": True},
    {"policy": "random"},  # no graph: the queue baseline
]
IDS = ["compiled", "reference", "preemption", "queue"]


def _sched(n_workers: int, n_tasks: int = 16, **opts):
    dc = Datacenter(worker_masks=np.zeros(n_workers, dtype=np.uint32))
    rec = TaskRecorder(np.zeros(n_tasks))
    s = build_scheduler("s", "pool", rec, dc, FlowOptions(**opts), np.random.default_rng(0), n_tasks)
    port = RecordingPort()
    s.attach(port)
    return s, port, rec


def _job(j: int, tasks) -> JobArrival:
    t = np.asarray(tasks, dtype=np.int64)
    return JobArrival(j, t, np.full(t.size, 10.0), np.zeros(t.size, dtype=np.uint32))


def _launched(port) -> dict[int, int]:
    out = {}
    for _, msg in port.take(Launch):
        out.update(zip(np.asarray(msg.tasks).tolist(), np.asarray(msg.workers).tolist(), strict=True))
    return out


def _round(s, now: float) -> None:
    s.on_timer("round", now)


def _sink_capacity(s, m: int) -> int:
    """The capacity of machine ``m``'s arc to the sink (how much flow the graph may send through it)."""
    net = s.g.net
    return int(net.uppers(np.array([s.g.machine_arc[m]]))[0])


@pytest.mark.parametrize("opts", GRAPHS, ids=IDS)
def test_a_dead_machine_leaves_the_graph_and_its_task_is_placed_again_when_it_is_back(opts) -> None:
    s, port, _ = _sched(2, **opts)
    s.on_message(_job(0, [0, 1, 2]), 0.0)
    _round(s, 0.0)
    first = _launched(port)
    assert sorted(first.values()) == [0, 1]
    on0 = next(t for t, w in first.items() if w == 0)
    # machine 0 dies with its task: the task waits again, but no free machine is left (machine 1 is busy)
    s.fail_machines(np.array([0]), np.array([on0]), np.array([0]), 1.0)
    assert s.down.tolist() == [True, False] and s.free[0] == 0
    assert s.counts["tasks_lost"] == 1 and s.counts["machines_failed"] == 1
    _round(s, 1.0)
    assert _launched(port) == {}
    if s.g is not None:
        assert s.g.machine_failed[0]
        assert _sink_capacity(s, 0) == 0  # no flow can reach the sink through the dead machine
        assert int(s.g.net.flows(np.array([s.g.machine_arc[0]]))[0]) == 0
    # machine 1's task finishes: one of the two waiting tasks goes there, never to the dead machine 0
    on1 = next(t for t, w in first.items() if w == 1)
    s.on_message(Finished(np.array([on1]), np.array([1])), 10.0)
    _round(s, 10.0)
    second = _launched(port)
    assert list(second.values()) == [1]
    # machine 0 comes back empty: the other waiting task goes there
    s.restore_machines(np.array([0]), 12.0)
    assert not s.down[0] and s.free[0] == 1
    if s.g is not None:
        assert not s.g.machine_failed[0]
    _round(s, 12.0)
    third = _launched(port)
    assert list(third.values()) == [0]
    assert sorted([*second, *third]) == sorted({0, 1, 2} - {on1})


@pytest.mark.parametrize("opts", GRAPHS, ids=IDS)
def test_a_completion_reported_from_a_dead_machine_does_not_reopen_it(opts) -> None:
    """A task that finished just before its machine died (its report still on the way) frees no slot there."""
    s, port, _ = _sched(2, **opts)
    s.on_message(_job(0, [0, 1]), 0.0)
    _round(s, 0.0)
    first = _launched(port)
    on0 = next(t for t, w in first.items() if w == 0)
    s.fail_machines(np.array([0]), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 5.0)
    s.on_message(Finished(np.array([on0]), np.array([0])), 5.001)
    s.on_message(_job(1, [2]), 5.001)
    _round(s, 5.001)
    assert _launched(port) == {}  # machine 1 is busy, machine 0 is down
    assert s.free[0] == 0
    s.restore_machines(np.array([0]), 6.0)
    _round(s, 6.0)
    assert _launched(port) == {2: 0}


@pytest.mark.parametrize("opts", GRAPHS, ids=IDS)
def test_a_launch_that_found_its_machine_dead_waits_again(opts) -> None:
    s, port, _ = _sched(2, **opts)
    s.on_message(_job(0, [0]), 0.0)
    _round(s, 0.0)
    ((t, w),) = _launched(port).items()
    s.fail_machines(np.array([w]), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0.0005)
    s.on_message(LaunchFailed(np.array([t]), np.array([w])), 0.001)
    _round(s, 1.0)
    assert _launched(port) == {t: 1 - w}  # placed again, on the live machine


def test_the_pool_loses_the_runs_on_dead_workers_and_bounces_launches() -> None:
    rec = TaskRecorder(np.zeros(4))
    pool = WorkerPool("pool", 3, rec)
    port = RecordingPort()
    pool.attach(port)
    pool.on_message(Launch(np.array([0, 1]), np.array([0, 1]), np.array([5.0, 5.0]), "s"), 0.0)
    lost = pool.fail_workers([1, 2], 2.0)
    assert lost == [(1, 1, "s")]
    assert rec.fault_kills.tolist() == [0, 1, 0, 0] and rec.work_lost == pytest.approx(2.0)
    pool.on_message(Launch(np.array([2, 3]), np.array([2, 1]), np.array([5.0, 5.0]), "s"), 3.0)
    ((dst, failed),) = port.take(LaunchFailed)
    assert dst == "s" and failed.tasks.tolist() == [2, 3] and failed.workers.tolist() == [2, 1]
    assert pool.running_tasks() == 1
    pool.restore_workers([1])
    pool.on_message(Launch(np.array([3]), np.array([1]), np.array([5.0]), "s"), 4.0)
    assert port.take(LaunchFailed) == [] and pool.running_tasks() == 2
    pool.on_message(Launch([2], [2], [5.0], "s"), 4.0)  # list messages get list answers
    ((_, failed),) = port.take(LaunchFailed)
    assert failed.tasks == [2]


def test_a_fault_takes_the_whole_machine_of_k_slots() -> None:
    s, _, _ = _sched(6, slots_per_machine=2)
    h = FlowFaults(s, WorkerPool("pool", 6, s.rec), 2)
    assert h.workers("worker", (3,)) == [2, 3]
    assert h.workers("worker", (0, 5)) == [0, 1, 4, 5]
    assert h.population("worker") == 6


def _run(opts: dict, faults: dict, resources: bool = False, seed: int = 1):
    kw = {"resources": True} if resources else {}
    cfg = RunConfig(
        scheduler="flow",
        trace="sample:YH_small",
        workers=40,
        max_jobs=40,
        seed=seed,
        constraints=True,
        options=opts,
        faults=faults,
        stall_timeout=3600.0,
        **kw,
    )
    return simulate(cfg)


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"interval": 0},
        {"preemption": True, "cost_model": "priority+quincy"},
        {"policy": "greedy"},
        {"slots_per_machine": 2},
    ],
    ids=["compiled", "reference", "preemption", "greedy", "k2"],
)
def test_runs_with_machine_failures_lose_no_task(opts) -> None:
    """Machines fail at random (some for good), the scheduler crashes once: every feasible task completes exactly
    once or is stranded (no live machine fits it), nothing starts on a dead machine, no machine is over-committed."""
    faults = {
        "seed": 4,
        "fault": [
            {"at": 1.0, "kind": "worker", "target": 0.2, "down_for": 30.0},
            {"at": 3.0, "kind": "worker", "target": 0.1},
            {"at": 5.0, "kind": "scheduler", "target": 0, "down_for": 2.0},
        ],
        "random": [{"kind": "worker", "mtbf": 400.0, "down_for": 5.0}],
    }
    r = _run(opts, faults)
    f = summarize(r)["faults"]
    assert f["injected"] >= 3 and f["tasks_reexecuted"] > 0 and f["work_lost_s"] > 0
    assert r.counters["flow_tasks_lost"] > 0
    assert_stranded_tasks_have_no_live_worker(r)
    assert_no_run_on_a_dead_worker(r)
    if r.stranded.size:
        r.feasible = r.feasible.copy()
        r.feasible[r.stranded] = False
        r.counters["tasks_infeasible"] += int(r.stranded.size)
        r.recorder.launches[r.stranded] = 0
    check(r, unbounded=False)


def test_no_fault_no_fault_state() -> None:
    """Without a schedule the scheduler never allocates its fault state (the hot path is unchanged)."""
    r = _run({}, None)
    assert r.faults is None and "flow_tasks_lost" not in r.counters


# --- fair shares under failures: demand no live machine can run takes no share -------------------------------------
FAIR = GRAPHS[:3]  # the graphs with Quincy's fairness bounds (the queue baseline has none)
FAIR_IDS = IDS[:3]


def _masked_sched(masks: list[int], n_tasks: int = 16, **opts):
    dc = Datacenter(worker_masks=np.array(masks, dtype=np.uint32))
    rec = TaskRecorder(np.zeros(n_tasks))
    s = build_scheduler("s", "pool", rec, dc, FlowOptions(**opts), np.random.default_rng(0), n_tasks)
    port = RecordingPort()
    s.attach(port)
    return s, port


def _masked_job(j: int, tasks, mask: int) -> JobArrival:
    t = np.asarray(tasks, dtype=np.int64)
    return JobArrival(j, t, np.full(t.size, 10.0), np.full(t.size, mask, dtype=np.uint32))


NONE = np.zeros(0, dtype=np.int64)


@pytest.mark.parametrize("opts", FAIR, ids=FAIR_IDS)
def test_tasks_arriving_while_the_only_machines_they_fit_are_down_take_no_fair_share(opts) -> None:
    """Machines 0 and 1 (bit 1) are down when job 0 (2 tasks needing bit 1) and job 1 (2 unconstrained tasks)
    arrive; machine 2 is the one live slot. Job 0's tasks cannot run anywhere, so job 1's max-min share is that
    slot (counting job 0's demand gave it the slot, job 1 none, and nothing ran: a deadlock)."""
    s, port = _masked_sched([0b10, 0b10, 0b00], **opts)
    s.fail_machines(np.array([0, 1]), NONE, NONE, 0.0)
    s.on_message(_masked_job(0, [0, 1], 0b10), 0.0)
    s.on_message(_masked_job(1, [2, 3], 0), 0.0)
    _round(s, 0.0)
    first = _launched(port)
    assert list(first.values()) == [2] and set(first) <= {2, 3}
    (t,) = first
    s.on_message(Finished(np.array([t]), np.array([2])), 10.0)
    _round(s, 10.0)
    assert _launched(port) == {5 - t: 2}  # job 1's other task
    # machine 0 is back: job 0's demand counts again and its first task goes there
    s.restore_machines(np.array([0]), 12.0)
    _round(s, 12.0)
    second = _launched(port)
    assert list(second.values()) == [0] and set(second) <= {0, 1}


@pytest.mark.parametrize("opts", FAIR, ids=FAIR_IDS)
def test_a_task_lost_with_the_only_machine_it_fits_takes_no_fair_share(opts) -> None:
    """Job 0's task needs machine 0 (bit 1) and is lost when it dies; job 1's second task must still get machine 1
    when its first task finishes there (the lost task's demand cannot run, so it holds no share of machine 1)."""
    s, port = _masked_sched([0b10, 0b00], **opts)
    s.on_message(_masked_job(0, [0], 0b10), 0.0)
    s.on_message(_masked_job(1, [1, 2], 0), 0.0)
    _round(s, 0.0)
    first = _launched(port)
    assert first[0] == 0 and sorted(first.values()) == [0, 1]
    on1 = next(t for t, w in first.items() if w == 1)
    s.fail_machines(np.array([0]), np.array([0]), np.array([0]), 1.0)
    _round(s, 1.0)
    assert _launched(port) == {}
    s.on_message(Finished(np.array([on1]), np.array([1])), 10.0)
    _round(s, 10.0)
    assert _launched(port) == {3 - on1: 1}
    s.restore_machines(np.array([0]), 12.0)
    _round(s, 12.0)
    assert _launched(port) == {0: 0}


@pytest.mark.parametrize("opts", FAIR, ids=FAIR_IDS)
def test_fair_shares_ignore_demand_stranded_by_dead_workers_regression(opts, tmp_path) -> None:
    """The example hypothesis found (tests/test_faults_run.py, flow-slot): jobs of 7, 3 and 6 one-second tasks at
    t=0, 4 workers with constraints, workers 1 and 0 die for good at t=0. At t=4.001 the 2 live slots were shared
    between jobs 0 and 1, whose waiting tasks fit only dead workers, and job 2 (one task that fits a live free
    worker) got none: 'no task ran or started ... although tasks were waiting'."""
    jobs = [(0.0, [1.0] * 7), (0.0, [1.0] * 3), (0.0, [1.0] * 6)]
    cfg = config("flow", "slot", write_trace(jobs, tmp_path / "w.tr"), 4, 2, 0, options=opts)
    faults = {"seed": 0, "fault": [{"at": 0.0, "kind": "worker", "target": 0.3}] * 2}
    r = simulate(cfg.model_copy(update={"faults": faults, "stall_timeout": 50.0}))
    assert r.unfinished_reason is None
    assert r.stranded.tolist() == [4, 8, 13, 14, 15]
    assert_stranded_tasks_have_no_live_worker(r)
    assert_no_run_on_a_dead_worker(r)
    done = np.ones(r.recorder.finishes.size, dtype=bool)
    done[r.stranded] = False
    assert (r.recorder.finishes[r.feasible & done] == 1).all()


def _up_counts(g) -> dict[int, tuple[int, int]]:
    """(kept count, brute-force count) of the machines up fitting each class with waiting tasks."""
    up = ~g.machine_failed
    mm = g.machine_mask

    def brute(q: int) -> int:
        return int((((mm & np.uint32(q)) == np.uint32(q)) & up).sum())

    if hasattr(g, "CT"):  # compiled graph
        return {int(q): (int(g._class_up[c]), brute(int(q))) for q, c in g._class_of.items() if g.CT[GK.CT_WAIT, c] > 0}
    return {q: (g._class_up[q], brute(q)) for q, c in g.classes.items() if c.waiting > 0}


@pytest.mark.parametrize("opts", FAIR, ids=FAIR_IDS)
def test_machines_up_per_class_follow_failures_and_repairs(opts) -> None:
    """The graphs count, while some machine is failed, the machines up that fit each class (a class with none takes
    no fair share): the counts follow failures, repeated failures and repairs, and go when every machine is up."""
    masks = [0b011, 0b001, 0b110, 0b100, 0b111, 0b000]
    s, _ = _masked_sched(masks, n_tasks=64, **opts)
    for j, q in enumerate([0b001, 0b100, 0b010, 0b110, 0b000]):
        s.on_message(_masked_job(j, range(10 * j, 10 * j + 10), q), 0.0)
    _round(s, 0.0)
    rng = np.random.default_rng(3)
    t = 1.0
    for _ in range(12):
        ms = rng.choice(6, size=int(rng.integers(1, 4)), replace=True)
        if rng.random() < 0.6:
            s.fail_machines(ms, NONE, NONE, t)
        else:
            s.restore_machines(ms, t)
        _round(s, t)
        if s.g.machine_failed.any():
            counts = _up_counts(s.g)
            assert counts and all(kept == brute for kept, brute in counts.values()), counts
        else:
            assert s.g._class_up is None
        t += 1.0
    s.restore_machines(np.arange(6), t)
    _round(s, t)
    assert s.g._class_up is None
