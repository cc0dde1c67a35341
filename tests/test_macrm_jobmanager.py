"""A MACRM job manager driven by hand-written messages: batch sampling, least-loaded placement, the sampling timeout,
doubling, the adaptive initial rate, leftovers to the central queue, centralized requests, failures and exit."""

from __future__ import annotations

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, JobArrival
from megha.schedulers.common.sampling import ProbeSampler
from megha.schedulers.macrm.jobmanager import JMContext, JobManager, KnownLedger, _Round
from megha.schedulers.macrm.messages import (
    Forget,
    JMExit,
    JMHeartbeat,
    JobDone,
    JobDoneAck,
    ModeChange,
    NodesLost,
    Placed,
    SampleDecision,
    SampleInquiry,
    SampleReply,
    TaskFailed,
    TaskRequest,
)
from megha.sim.component import RecordingPort

N = 200
ALL = np.uint32((1 << 21) - 1)


def make(
    n_tasks=9,
    load=0.5,
    central=False,
    max_retries=3,
    rate="adaptive",
    doubling=True,
    per_responder="fill",
    round_end="all",
):
    rec = TaskRecorder(np.zeros(100))
    rec.expect(n_tasks)
    masks = np.full(N, ALL)
    ctx = JMContext(
        "arb",
        ["nm0", "nm1"],
        (np.arange(N) >= N // 2).astype(np.int64),
        ["tr0", "tr1"],
        masks,
        ProbeSampler(masks),
        rec,
        KnownLedger(rec, 100),
        1,
        rate=rate,
        doubling=doubling,
        max_retries=max_retries,
        sampling_timeout=0.005,
        per_responder=per_responder,
        round_end=round_end,
    )
    spec = JobArrival(
        3, np.arange(10, 10 + n_tasks), np.ones(n_tasks), np.zeros(n_tasks, dtype=np.uint32), np.ones((n_tasks, 1))
    )
    jm = JobManager("jm3.0", ctx, spec, 0, 150, load, central)
    port = RecordingPort(seed=1)
    jm.attach(port)
    jm.on_start(0.0)
    return jm, port, rec


def sampled(port):
    msgs = port.take(SampleInquiry)
    nodes = [n for _, m in msgs for n in m.nodes]
    assert len(nodes) == len(set(nodes))
    assert all((d == "nm0") == (max(m.nodes) < N // 2) for d, m in msgs)  # each group gets its own nodes
    return nodes, msgs[0][1].token


def reply(jm, token, nodes, free, now, cap=4.0):
    jm.on_message(
        SampleReply(token, list(nodes), np.array(free, dtype=float)[:, None], np.full((len(nodes), 1), cap)), now
    )


def decisions(port):
    launched, cancelled = {}, []
    for _, m in port.take(SampleDecision):
        for t, n in zip(m.containers.tasks, m.containers.nodes, strict=True):
            launched[t] = n
        cancelled += m.cancel
    return launched, cancelled


def round_timeout(jm, port, now):
    (key,) = [k for _, k in port.timers.values() if k[0] == "round" and k[1] == jm.round_no]
    jm.on_timer(key, now)


def test_batch_sampling_of_d_times_n_nodes_and_least_loaded_placement():
    jm, port, rec = make(n_tasks=2, load=0.5)
    nodes, token = sampled(port)
    assert len(nodes) == 4  # d = 2 below 75 % load
    a, b, c = nodes[:3]
    reply(jm, token, [a, b], [1.0, 4.0], 0.001)
    reply(jm, token, [c], [2.0], 0.001)
    assert port.take(SampleDecision) == []  # one node has not answered: wait for the timeout
    round_timeout(jm, port, 0.005)
    launched, cancelled = decisions(port)
    assert launched == {10: b, 11: b}  # least loaded first, load updated after each placement
    assert sorted(cancelled) == sorted([a, c])
    assert np.isfinite(rec.scheduled[[10, 11]]).all()


def test_one_task_per_responder_fails_the_round_with_fewer_than_n_responders():
    jm, port, _ = make(n_tasks=2, load=0.5, per_responder="one")
    nodes, token = sampled(port)
    a, b = nodes[:2]
    reply(jm, token, [a, b], [1.0, 4.0], 0.001)
    round_timeout(jm, port, 0.005)
    launched, cancelled = decisions(port)
    assert launched == {10: b, 11: a} and cancelled == []  # one task each, the least loaded first
    jm2, port2, _ = make(n_tasks=2, load=0.5, per_responder="one")
    nodes2, token2 = sampled(port2)
    reply(jm2, token2, [nodes2[0]], [4.0], 0.001)  # room for both, but one responder takes one task
    round_timeout(jm2, port2, 0.005)
    launched2, _ = decisions(port2)
    assert len(launched2) == 1 and jm2.stats["sampling_failures"] == 1
    assert len(sampled(port2)[0]) == 4 * 1  # the retry samples d = 2 x 2 for the one leftover task (doubled)


def test_placement_without_waiting_when_every_sampled_node_answered():
    jm, port, _ = make(n_tasks=1)
    nodes, token = sampled(port)
    reply(jm, token, nodes, [3.0, 2.0], 0.001)
    launched, cancelled = decisions(port)
    assert launched == {10: nodes[0]} and cancelled == [nodes[1]]
    assert jm.round is None


def test_round_end_enough_places_once_the_answers_hold_every_task():
    """round_end="enough": answers that hold every task end the round without waiting for the silent nodes, after
    the answers arriving at that same instant (a zero-delay timer); answers that come later are released."""
    jm, port, _ = make(n_tasks=2, load=0.5, per_responder="one", round_end="enough")
    nodes, token = sampled(port)
    a, b, c, d = nodes
    reply(jm, token, [a], [4.0], 0.001)  # one responder cannot take two tasks: keep waiting
    assert [k for _, k in port.timers.values() if k[0] == "round"] == [("round", 1)]
    reply(jm, token, [b], [1.0], 0.001)  # now two responders hold both tasks: place after this instant's answers
    rounds = sorted((dl, k) for dl, k in port.timers.values() if k[0] == "round")
    assert rounds == [(0.0, ("round", 1)), (0.005, ("round", 1))]
    reply(jm, token, [c], [3.0], 0.001)  # same instant: still compared
    assert port.take(SampleDecision) == []
    (zero,) = [h for h, (dl, k) in port.timers.items() if dl == 0.0]
    jm.on_timer(port.timers.pop(zero)[1], 0.001)
    launched, cancelled = decisions(port)
    assert launched == {10: a, 11: c} and cancelled == [b]  # the two least loaded of the three answers
    assert jm.round is None and not [k for _, k in port.timers.values() if k[0] == "round"]  # timeout cancelled
    reply(jm, token, [d], [4.0], 0.002)  # too late
    assert decisions(port) == ({}, [d]) and jm.stats["late_replies"] == 1


def test_round_end_timeout_always_waits_for_the_timer():
    jm, port, _ = make(n_tasks=1, round_end="timeout")
    nodes, token = sampled(port)
    reply(jm, token, nodes, [3.0, 2.0], 0.001)  # everyone answered, still wait
    assert port.take(SampleDecision) == [] and jm.round is not None
    round_timeout(jm, port, 0.005)
    launched, cancelled = decisions(port)
    assert launched == {10: nodes[0]} and cancelled == [nodes[1]]


def _scan(todo, dem, free, cap, one):
    """Reference placement: task by task (largest first), the least loaded responder that fits, lowest position on
    ties; a responder takes one task (one) or tasks while they fit (fill)."""
    free = free.copy()
    safe = np.where(cap > 0, cap, 1.0)
    taken = np.zeros(len(free), dtype=bool)
    out = {}
    for k in sorted(range(len(todo)), key=lambda k: tuple(-dem[k])):
        ok = (free + 1e-9 >= dem[k]).all(axis=1) & ~(taken if one else np.zeros_like(taken))
        if ok.any():
            j = int(np.argmin(np.where(ok, ((cap - free) / safe).max(axis=1), np.inf)))
            free[j] -= dem[k]
            taken[j] = True
            out[todo[k]] = j
    return out


def test_fast_placement_of_alike_tasks_matches_the_scan():
    rng = np.random.default_rng(7)
    for case in range(300):
        one = case % 2 == 0
        jm, _, _ = make(n_tasks=int(rng.integers(1, 9)), per_responder="one" if one else "fill")
        n_resp = int(rng.integers(1, 12))
        cap = rng.choice([2.0, 4.0, 8.0], size=(n_resp, 2))
        free = np.round(cap * rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=cap.shape), 3)  # ties on purpose
        alike = case % 3 != 0
        d = rng.choice([0.25, 0.5, 1.0], size=(jm.n, 2))
        jm.demands = np.tile(d[0], (jm.n, 1)) if alike else d
        todo = list(range(jm.n))
        r = _Round(1, (3, 0, 1), todo, np.arange(n_resp), 0)
        r.resp, r.free, r.cap = list(range(n_resp)), [free], [cap]
        assert jm._assign(r)[1] == _scan(todo, jm.demands[todo], free, cap, one), case


def test_adaptive_initial_rate_from_the_cluster_load():
    for load, rate in ((0.5, 2), (0.8, 3), (0.85, 5), (0.9, 8)):
        _, port, _ = make(n_tasks=9, load=load)
        nodes, _ = sampled(port)
        assert len(nodes) == min(N, rate * 9), load
    _, port, _ = make(n_tasks=9, load=0.9, rate="fixed")
    assert len(sampled(port)[0]) == 18


def test_failed_round_doubles_the_rate_then_leftovers_go_to_the_central_queue():
    jm, port, _ = make(n_tasks=5, load=0.5, max_retries=2)
    sizes = []
    for r in range(3):
        nodes, token = sampled(port)
        sizes.append(len(nodes))
        if r == 0:
            reply(jm, token, nodes[:2], [1.0, 1.0], 0.001 + r)
        round_timeout(jm, port, 0.005 + r)
        decisions(port)
    assert sizes == [10, 12, 24]  # 2·5, then 2·2·3 left, then 4·2·3
    assert jm.stats["sampling_failures"] == 3 and jm.stats["retries"] == 2
    (req,) = port.take(TaskRequest)
    assert req[0] == "arb" and len(req[1].tasks) == 3 and jm.stats["leftover_to_central"] == 3
    assert port.take(SampleInquiry) == []


def test_without_doubling_the_rate_stays():
    jm, port, _ = make(n_tasks=4, load=0.5, doubling=False, max_retries=5)
    nodes, _ = sampled(port)
    round_timeout(jm, port, 0.005)
    assert len(sampled(port)[0]) == len(nodes) == 8


def test_late_replies_release_the_nodes():
    jm, port, _ = make(n_tasks=1)
    nodes, token = sampled(port)
    round_timeout(jm, port, 0.005)
    port.take()
    reply(jm, token, nodes[:1], [4.0], 0.006)
    launched, cancelled = decisions(port)
    assert launched == {} and cancelled == nodes[:1] and jm.stats["late_replies"] == 1


def test_centralized_mode_requests_then_finishes_and_exits():
    jm, port, rec = make(n_tasks=3, central=True)
    (req,) = port.take(TaskRequest)
    assert req[1].tasks == [10, 11, 12] and port.take(SampleInquiry) == []
    jm.on_message(Placed(0, [10, 11, 12], [4, 5, 120]), 0.002)
    jm.on_message(TaskFailed([11], [5]), 0.5)
    (req,) = port.take(TaskRequest)
    assert req[1].tasks == [11] and jm.stats["task_reruns"] == 1
    jm.on_message(Placed(0, [11], [7]), 0.6)
    jm.on_message(Finished([10, 12], [4, 120]), 1.0)
    jm.on_message(Finished([11], [7]), 1.6)
    assert rec.outstanding == 0
    (done,) = port.take(JobDone)
    assert done[0] == "arb" and done[1].attempt == 0
    jm.on_message(JobDoneAck(3, 0), 1.601)
    assert [d for d, _ in port.take(JMExit)] == ["nm1"]  # its own node's group releases the container
    assert [m.final for _, m in port.take(JMHeartbeat)] == [True]
    assert sorted(d for d, _ in port.take(Forget)) == ["nm0", "nm1"]


def test_switch_to_centralized_mode_and_lost_nodes():
    jm, port, _ = make(n_tasks=2, load=0.5)
    nodes, token = sampled(port)
    reply(jm, token, nodes[:2], [4.0, 4.0], 0.001)
    round_timeout(jm, port, 0.005)
    launched, _ = decisions(port)
    jm.on_message(ModeChange(True, 0.93), 0.1)
    jm.on_message(NodesLost([launched[10]]), 4.0)
    (req,) = port.take(TaskRequest)  # centralized now: the lost task goes to the central queue
    assert 10 in req[1].tasks and jm.stats["tasks_lost_on_nodes"] >= 1


def _assign_masked_reference(todo, free, cap, safe, wm, d, masks, one):
    """The job manager's masked assignment as Python/numpy (before the compiled loop): the rule, step by step."""
    eps = 1e-9
    assigned = {}
    load = ((cap - free) / safe).max(axis=1)
    gone = ~(free + eps >= d).all(axis=1)
    free_l, cap_l, safe_l = free.tolist(), cap.tolist(), safe.tolist()
    dl = d.tolist()
    inv = ~wm
    for i, m in zip(todo, masks.tolist(), strict=True):
        idx = np.flatnonzero((np.uint32(m) & inv) == 0) if m else None
        if idx is None:
            j = int(np.argmin(np.where(gone, np.inf, load)))
        else:
            if not idx.size:
                continue
            j = int(idx[int(np.argmin(np.where(gone[idx], np.inf, load[idx])))])
        if gone[j]:
            continue
        fj = free_l[j] = [x - y for x, y in zip(free_l[j], dl, strict=True)]
        assigned[i] = j
        load[j] = max((c - f) / s for c, f, s in zip(cap_l[j], fj, safe_l[j], strict=True))
        if one or not all(f + eps >= x for f, x in zip(fj, dl, strict=True)):
            gone[j] = True
    return assigned


def test_masked_assignment_kernel_matches_the_rule():
    rng = np.random.default_rng(11)
    for trial in range(300):
        k = int(rng.integers(1, 12))
        n = int(rng.integers(1, 25))
        cap = rng.choice([0.0, 0.25, 0.5, 1.0], size=(k, 2))
        free = cap * rng.choice([0.0, 0.3, 0.5, 1.0], size=(k, 2))
        safe = np.where(cap > 0, cap, 1.0)
        wm = rng.integers(0, 8, size=k).astype(np.uint32)
        masks = rng.choice([0, 1, 2, 4, 3, 8], size=n).astype(np.uint32)
        d = rng.choice([0.0, 0.05, 0.1, 0.25], size=2)
        one = bool(trial % 3 == 0)
        todo = list(range(100, 100 + n))
        want = _assign_masked_reference(todo, free.copy(), cap, safe, wm, d, masks, one)
        got: dict[int, int] = {}
        JobManager._assign_masked(todo, free.copy(), cap, safe, wm, d, masks, one, got)
        assert list(got.items()) == list(want.items()), trial
