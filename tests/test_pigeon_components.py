"""PigeonC/Pigeon components driven by hand-written messages: weighted master choice, WFQ order, reservation."""

from __future__ import annotations

import numpy as np
import pytest

from megha.errors import SimulationError
from megha.metrics.recorder import TaskRecorder
from megha.model.matching import Policy, SegmentedIndex
from megha.schedulers.common.messages import JobArrival, Launch
from megha.schedulers.pigeon.cutoff import TRACE_CUTOFFS, resolve_cutoff, trace_family
from megha.schedulers.pigeon.distributor import MasterWeights, PigeonDistributor
from megha.schedulers.pigeon.master import PigeonMaster
from megha.schedulers.pigeon.messages import Ended, Start, TaskBatch, TaskDone
from megha.schedulers.pigeon.workers import GroupWorkers
from megha.sim.component import RecordingPort

U32 = np.uint32


def attach(comp, seed=0):
    comp.attach(RecordingPort(seed))
    comp.on_start(0.0)
    return comp


def weights_3_groups():
    # group 0: masks 01, 11; group 1: 00; group 2: 11, 11, 10
    masks = np.array([0b01, 0b11, 0b00, 0b11, 0b11, 0b10], dtype=U32)
    groups = [np.array([0, 1]), np.array([2]), np.array([3, 4, 5])]
    return MasterWeights(SegmentedIndex(groups, masks))


def test_master_weights_count_suitable_workers_per_group():
    w = weights_3_groups()
    assert w.counts(0b00).tolist() == [2, 1, 3]
    assert w.counts(0b01).tolist() == [2, 0, 2]
    assert w.counts(0b11).tolist() == [1, 0, 2]
    assert w.counts(0b10).tolist() == [1, 0, 3]


def test_weighted_choice_follows_the_cumulative_weights_and_skips_empty_masters():
    w = weights_3_groups()
    masks = np.full(5, 0b01, dtype=U32)  # weights [2, 0, 2]
    u = np.array([0.0, 0.49, 0.5, 0.75, 0.999])
    assert w.choose(masks, u).tolist() == [0, 0, 2, 2, 2]
    # mixed masks in one job
    masks = np.array([0b11, 0b00, 0b10], dtype=U32)  # cum [1,1,3], [2,3,6], [1,1,4]
    assert w.choose(masks, np.array([0.34, 0.34, 0.24])).tolist() == [2, 1, 0]


def test_list_choice_is_the_vectorized_choice():
    """The distributor's common path (choose_list, on plain lists) chooses exactly what choose does, on boundary
    draws (u·total landing on a cumulative count) and random ones, with one mask or mixed masks per job."""
    w = weights_3_groups()
    masks = np.array([0b01, 0b01, 0b11, 0b00, 0b10, 0b10, 0b00], dtype=U32)
    u = np.array([0.0, 0.5, 1 / 3, 0.5, 0.25, 0.999999, 2 / 6])
    assert w.choose_list(masks.tolist(), u.tolist()) == w.choose(masks, u).tolist()
    rng = np.random.default_rng(11)
    for n in (1, 2, 7, 40):
        for mixed in (False, True):
            m = rng.choice(np.array([0, 1, 2, 3], dtype=U32), n) if mixed else np.full(n, 0b10, dtype=U32)
            x = rng.random(n)
            assert w.choose_list(m.tolist(), x.tolist()) == w.choose(m, x).tolist()


def test_weighted_choice_frequencies_match_suitable_worker_counts():
    w = weights_3_groups()
    rng = np.random.default_rng(5)
    picks = w.choose(np.full(60_000, 0b10, dtype=U32), rng.random(60_000))  # weights [1, 0, 3]
    freq = np.bincount(picks, minlength=3) / picks.size
    assert freq[1] == 0
    assert abs(freq[0] - 0.25) < 0.01 and abs(freq[2] - 0.75) < 0.01


def test_even_spread_round_robins_and_skips_masters_without_a_suitable_worker():
    w = weights_3_groups()
    assert w.spread(np.zeros(5, dtype=U32), 1).tolist() == [1, 2, 0, 1, 2]
    # mask 01 has no worker in group 1: a task whose turn is master 1 goes to master 2
    assert w.spread(np.full(3, 0b01, dtype=U32), 0).tolist() == [0, 2, 2]


def test_distributor_sends_each_task_once_to_masters_with_suitable_workers_and_classifies_jobs():
    w = weights_3_groups()
    rec = TaskRecorder(np.zeros(20))
    d = attach(PigeonDistributor("d0", 0, ["m0", "m1", "m2"], w, rec, cutoff=10.0))
    tasks = np.arange(8, dtype=np.int64)
    masks = np.array([0b01, 0b11, 0b10, 0b01, 0b00, 0b11, 0b01, 0b01], dtype=U32)
    d.on_message(JobArrival(0, tasks, np.ones(8), masks, mean_duration=5.0), 0.0)
    sent = d.port.take()
    seen = []
    for dst, msg in sent:
        assert isinstance(msg, TaskBatch) and msg.short and msg.distributor == 0
        m = int(dst[1:])
        for t, mask in zip(msg.tasks.tolist(), msg.masks.tolist(), strict=True):
            assert w.counts(mask)[m] > 0
            seen.append(t)
    assert sorted(seen) == tasks.tolist()
    d.on_message(JobArrival(1, np.array([9]), np.ones(1), np.zeros(1, dtype=U32), mean_duration=10.0), 1.0)
    ((_, msg),) = d.port.take()
    assert not msg.short  # mean duration == cutoff: long
    d.on_message(TaskDone(9), 2.0)
    assert rec.known[9] == 2.0


def make_master(masks, fqw=2, reserved=None, policy=Policy.FIRST, n_tasks=50, **kw):
    masks = np.asarray(masks, dtype=U32)
    rec = TaskRecorder(np.zeros(n_tasks))
    m = attach(
        PigeonMaster(
            "m",
            np.arange(masks.size),
            masks,
            "pool",
            rec,
            ["d0", "d1"],
            policy=policy,
            fqw=fqw,
            reserved=reserved,
            **kw,
        )
    )
    return m, rec


def batch(tasks, short, masks=None, dist=0, job=0):
    tasks = np.asarray(tasks, dtype=np.int64)
    masks = np.zeros(tasks.size, dtype=U32) if masks is None else np.asarray(masks, dtype=U32)
    return TaskBatch(job, tasks, np.ones(tasks.size), masks, short, dist)


def launched(port):
    """(task, worker) pairs of the Start/Launch messages sent, in order."""
    out = []
    for _, msg in port.take():
        if isinstance(msg, Start):
            out.append((msg.task, msg.worker))
        elif isinstance(msg, Launch):
            out.extend(zip(msg.tasks.tolist(), msg.workers.tolist(), strict=True))
    return out


def test_wfq_serves_fqw_short_tasks_per_long_task():
    m, _ = make_master([0], fqw=2)
    m.on_message(batch([0], short=False), 0.0)  # takes the only worker
    assert launched(m.port) == [(0, 0)]
    m.on_message(batch([1, 2, 3, 4, 5], short=True), 0.1)
    m.on_message(batch([6, 7], short=False), 0.2)
    assert m.queued() == 7
    order = []
    running = 0
    for k in range(7):
        m.on_message(Ended(running, 0), 1.0 + k)
        ((running, w),) = launched(m.port)
        assert w == 0
        order.append(running)
    assert order == [1, 2, 6, 3, 4, 7, 5]  # S S L S S L S


def test_wfq_reference_counter_serves_fqw_plus_one_short_tasks_per_long_task():
    m, _ = make_master([0], fqw=2, fq_inclusive=True)  # the authors' code: short while counter <= FQW
    m.on_message(batch([0], short=False), 0.0)
    launched(m.port)
    m.on_message(batch([1, 2, 3, 4, 5, 6], short=True), 0.1)
    m.on_message(batch([7, 8], short=False), 0.2)
    order = []
    running = 0
    for k in range(8):
        m.on_message(Ended(running, 0), 1.0 + k)
        ((running, _),) = launched(m.port)
        order.append(running)
    assert order == [1, 2, 3, 7, 4, 5, 6, 8]  # S S S L S S S L


def test_long_task_runs_when_no_queued_short_task_fits_the_freed_worker():
    # worker 0 has constraints {0,1}, worker 1 only {0}
    m, _ = make_master([0b11, 0b01], fqw=20)
    m.on_message(batch([0, 1], short=True), 0.0)
    assert sorted(launched(m.port)) == [(0, 0), (1, 1)]
    m.on_message(batch([2], short=True, masks=[0b10]), 0.1)  # needs worker 0
    m.on_message(batch([3], short=False, masks=[0b01]), 0.2)
    m.on_message(Ended(1, 1), 1.0)  # worker 1 frees: the short task does not fit, the long one does
    assert launched(m.port) == [(3, 1)]
    m.on_message(Ended(0, 0), 2.0)
    assert launched(m.port) == [(2, 0)]


def test_freed_worker_with_nothing_fitting_becomes_available_and_completion_goes_to_the_distributor():
    m, _ = make_master([0b01], fqw=20)
    m.on_message(batch([0], short=True, dist=1), 0.0)
    launched(m.port)
    m.on_message(Ended(0, 0), 1.0)
    assert m.port.take() == [("d1", TaskDone(0))]
    assert m.n_free == 1
    m.on_message(batch([1], short=True, dist=0), 2.0)
    assert launched(m.port) == [(1, 0)]


def test_min_constraints_policy_picks_the_least_constrained_suitable_worker():
    m, _ = make_master([0b111, 0b011, 0b001, 0b000], policy=Policy.MIN_CONSTRAINTS)
    m.on_message(batch([0], short=True, masks=[0b001]), 0.0)
    assert launched(m.port) == [(0, 2)]
    m.on_message(batch([1], short=True, masks=[0b001]), 0.0)
    assert launched(m.port) == [(1, 1)]


def test_pigeon_reserved_workers_take_short_tasks_only():
    m, _ = make_master([0, 0], reserved=np.array([0]))
    m.on_message(batch([0], short=False), 0.0)
    assert launched(m.port) == [(0, 1)]  # long task avoids the reserved worker
    m.on_message(batch([1], short=False), 0.1)
    assert launched(m.port) == []  # queued although worker 0 is free
    m.on_message(batch([2], short=True), 0.2)
    assert launched(m.port) == [(2, 0)]
    m.on_message(batch([3], short=True), 0.3)
    m.on_message(Ended(2, 0), 1.0)  # reserved worker: short queue only
    assert launched(m.port) == [(3, 0)]
    m.on_message(Ended(3, 0), 2.0)  # only a long task waits: the reserved worker stays idle
    assert launched(m.port) == [] and m.n_free == 1
    m.on_message(Ended(0, 1), 3.0)
    assert launched(m.port) == [(1, 1)]


def test_pigeon_long_task_that_only_reserved_workers_can_run_may_use_them():
    m, _ = make_master([0b1, 0b0], reserved=np.array([0]))
    m.on_message(batch([0], short=False, masks=[0b1]), 0.0)
    assert launched(m.port) == [(0, 0)]


def test_group_workers_reject_over_commit_and_report_ends():
    rec = TaskRecorder(np.zeros(5))
    g = attach(GroupWorkers("g", "m", np.array([3, 4]), rec))
    g.on_message(Start(0, 3, 2.0), 0.0)
    with pytest.raises(
        SimulationError, match=r"^g: worker 3 over-committed at t=0\.500000: task 1 launched while it runs task 0$"
    ):
        g.on_message(Start(1, 3, 1.0), 0.5)  # the worker ledger's one error
    with pytest.raises(SimulationError, match="not in this group"):
        g.on_message(Start(1, 7, 1.0), 0.5)
    ((delay, key),) = g.port.timers.values()
    assert delay == 2.0
    g.on_timer(key, 2.0)
    assert g.port.take() == [("m", Ended(0, 3))]
    assert rec.end[0] == 2.0


def test_cutoff_per_trace_family():
    assert trace_family("GOOG_subtrace") == "google"
    assert trace_family("YH1_sub") == "yahoo"
    assert trace_family("synthetic_FB_sub_2000jobs") == "facebook"
    assert trace_family("syn_250.0") is None
    assert resolve_cutoff(None, "GOOG_subtrace") == (TRACE_CUTOFFS["google"], "trace:google")
    assert resolve_cutoff(3.0, "GOOG_subtrace") == (3.0, "option")
    assert resolve_cutoff(None, "syn_250.0", {"cutoff": 2}) == (2.0, "cluster-file")
    assert resolve_cutoff(None, "mytrace")[0] == TRACE_CUTOFFS["yahoo"]
    # the authors' code reads the cluster file's cutoff (2 s in the 10k configuration) whatever the trace
    assert resolve_cutoff(None, "YH1_sub", {"cutoff": 2}, cluster_first=True) == (2.0, "cluster-file")
    assert resolve_cutoff(None, "YH1_sub", {}, cluster_first=True) == (2.0, "reference-config")
    assert resolve_cutoff(5.0, "YH1_sub", {"cutoff": 2}, cluster_first=True) == (5.0, "option")


def test_iot23_profile_sets_the_authors_choices_unless_given():
    from megha.schedulers import registry
    from megha.schedulers.pigeon import PigeonCOptions

    o = PigeonCOptions(profile="iot23")
    assert (o.weights, o.policy, o.cutoff_from, o.fq_rule) == (
        "reference",
        Policy.MIN_CONSTRAINTS,
        "cluster",
        "reference",
    )
    o = PigeonCOptions(profile="iot23", policy="random", weights="exact")
    assert (o.weights, o.policy, o.fq_rule) == ("exact", Policy.RANDOM, "reference")
    o = PigeonCOptions()
    assert (o.weights, o.policy, o.cutoff_from, o.fq_rule) == ("exact", Policy.RANDOM, "trace", "paper")
    assert "iot23" in registry.get("pigeonc").profiles


def test_reference_weights_reproduce_the_authors_constraint_set_table():
    # one group, workers in order {0,1}, {0}, {2}: the table is {{0,1}: 2, {2}: 1}
    masks = np.array([0b011, 0b001, 0b100], dtype=U32)
    idx = SegmentedIndex([np.array([0, 1, 2])], masks)
    exact, ref = MasterWeights(idx), MasterWeights(idx, reference=True)
    assert exact.counts(0b010).tolist() == [1] and ref.counts(0b010).tolist() == [2]  # over-counted
    assert exact.counts(0b001).tolist() == [2] and ref.counts(0b001).tolist() == [2]
    assert exact.counts(0b100).tolist() == [1] and ref.counts(0b100).tolist() == [1]
    assert ref.counts(0b000).tolist() == [3]


def test_group_workers_with_gaps_in_their_ids_keep_them_on_one_ledger():
    """A group whose worker ids are not contiguous: the ledger spans them, the gap is never a member."""
    rec = TaskRecorder(np.zeros(5))
    g = attach(GroupWorkers("g", "m", np.array([2, 6]), rec))
    assert (g.ledger.first, g.ledger.n_workers) == (2, 5)
    g.on_message(Start(0, 6, 1.0), 0.0)
    g.on_message(Start(1, 2, 1.0), 0.0)
    assert (g.ledger.running_on(6), g.ledger.running_on(2), g.running()) == (0, 1, 2)
    with pytest.raises(SimulationError, match="worker 4 is not in this group"):
        g.on_message(Start(2, 4, 1.0), 0.0)
    ((_, key),) = g.port.timers.values()
    g.on_timer(key, 1.0)
    assert g.running() == 0 and g.ledger.running_on(6) == -1
