"""``-o pull_overwrites=true``: the 2020 simulator's state pull, where each update rebuilds the GM's view from the
LMs' state and so shows the GM's own unverified bookings free again (hand-written messages, then small full runs)."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.errors import InputError
from megha.runner import simulate
from megha.schedulers import registry
from megha.schedulers.megha import MeghaOptions
from megha.schedulers.megha.messages import LaunchReply, StateDelta, StatePull, TaskDone
from tests.test_megha_components import gm, job, lm, requests

D = 0.0005  # the GM -> LM delay the builder passes


def scan_gm(overwrites: bool = True):
    return gm(
        matching="scan",
        full_pull=True,
        queue="fewest-tasks",
        repartition=False,
        pull_overwrites=D if overwrites else None,
    )


def flush(g, port, now):
    """The end of the instant: with pull_overwrites the GM sends its bookings on a zero-delay timer."""
    keys = [k for _, k in port.timers.values()]
    port.timers.clear()
    if "overwrite_flush" in keys:
        g.on_timer("overwrite_flush", now)
    return requests(port)


def answer_pull(g, port, now, acked=(0, 0)):
    pulls = port.take(StatePull)
    assert sorted(d for d, _ in pulls) == ["megha/lm0", "megha/lm1"]
    pid = pulls[0][1].pull
    for lmi in (0, 1):
        g.on_message(StateDelta(lmi, [], [], False, None, acked[lmi], pid), now)
    return pid


def filled(overwrites: bool = True):
    """GM0 of 2 GMs x 2 LMs (internal workers 0, 1 on LM0 and 4, 5 on LM1), all four busy, tasks queued."""
    g, port = scan_gm(overwrites)
    g.on_message(job([0, 1, 2, 3]), 0.0)
    r0, r1 = flush(g, port, 0.0)
    assert sorted(r0.workers + r1.workers) == [0, 1, 4, 5]
    g.on_message(job([10, 11, 12], j=1), 0.1)
    g.on_message(job([20], j=2), 0.2)
    assert flush(g, port, 0.2) == []
    return g, port, r0, r1


def test_bookings_wait_for_the_end_of_the_instant():
    g, port = scan_gm()
    g.on_message(job([0, 1]), 0.0)
    assert requests(port) == []
    assert [k for _, k in port.timers.values()] == ["overwrite_flush"]
    g.on_message(job([2], j=1), 0.0)  # a second step of the same instant arms no second timer
    assert len(port.timers) == 1
    reqs = flush(g, port, 0.0)
    assert sorted(t for r in reqs for t in r.tasks) == [0, 1, 2]


def test_k_completions_at_one_instant_book_free_workers_k_times():
    g, port, r0, r1 = filled()
    g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req), 1.0)  # two tasks end: two updates
    answer_pull(g, port, 1.001, (r0.req, r1.req))
    (r,) = flush(g, port, 1.001)
    # update 1 books the queue's head (job 2, then job 1's first task) on workers 0 and 1; update 2 sees them free
    # again (LM0 has not verified them) and books the rest of job 1 on them
    assert sorted(r.tasks) == [10, 11, 12, 20] and sorted(r.workers) == [0, 0, 1, 1]
    assert len(g.queue) == 0


def test_without_the_option_each_worker_is_booked_once():
    g, port, r0, r1 = filled(overwrites=False)
    g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req), 1.0)
    answer_pull(g, port, 1.001, (r0.req, r1.req))
    (r,) = requests(port)
    assert r.tasks == [20, 10] and sorted(r.workers) == [0, 1]
    assert len(g.queue) == 2


def test_an_lm_keeps_one_booking_per_worker():
    l0, port = lm()
    from megha.schedulers.megha.messages import LaunchRequest

    l0.on_message(LaunchRequest(0, 1, [5, 6, 7], [0, 0, 1], [1.0] * 3, [0] * 3), 0.0)
    (reply,) = [m for _, m in port.take(LaunchReply)]
    assert reply.rejected == [6]


def test_bookings_older_than_one_delay_are_verified_and_stay_booked():
    g, port, r0, r1 = filled()
    g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req), 1.0)
    answer_pull(g, port, 1.001, (r0.req, r1.req))
    assert len(flush(g, port, 1.001)) == 1
    g.on_message(job([30, 31], j=3), 1.005)  # an arrival serves the queue on the view as it is: nothing free
    assert flush(g, port, 1.005) == []
    g.on_message(TaskDone(1, [2], [4], None, r1.req), 1.01)
    answer_pull(g, port, 1.011, (r0.req, r1.req))
    (r2,) = flush(g, port, 1.011)
    assert r2.tasks == [30] and r2.workers == [4]  # workers 0 and 1 (booked at 1.001) are not free again


def test_a_rejection_is_an_update_per_rejected_task():
    g, port, r0, r1 = filled()
    g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req), 1.0)
    answer_pull(g, port, 1.001, (r0.req, r1.req))
    (r,) = flush(g, port, 1.001)
    lost = [t for i, (t, w) in enumerate(zip(r.tasks, r.workers, strict=True)) if w in r.workers[:i]]
    assert len(lost) == 2  # the second booking of each worker
    g.on_message(LaunchReply(0, r.req, lost, [0, 1], [False, False], None, r.req), 1.002)
    pulls = port.take(StatePull)
    assert len(pulls) == 2 and g._ow_rounds[pulls[0][1].pull] == 2
    assert sorted(e[0] for e in g.queue.in_order()) == sorted(lost)


def test_same_instant_pulls_are_one_pull_with_all_their_updates():
    g, port, r0, r1 = filled()
    g.on_message(TaskDone(0, [0], [0], None, r0.req), 1.0)
    g.on_message(TaskDone(1, [2, 3], [4, 5], None, r1.req), 1.0)
    pulls = port.take(StatePull)
    assert len(pulls) == 2  # one pull (one message per LM)
    assert g._ow_rounds[pulls[0][1].pull] == 3


def test_one_heartbeat_is_one_update_however_many_lms_report():
    g, port = scan_gm()
    g.on_message(job([0, 1, 2, 3]), 0.0)
    assert len(flush(g, port, 0.0)) == 2
    g.on_message(job([10, 11, 12, 13, 14, 15, 16, 17], j=1), 0.0001)
    g.on_message(StateDelta(0, [], [], False, None, 0, 0), 0.0002)  # LM0's heartbeat: an update
    g.on_message(StateDelta(1, [], [], False, None, 0, 0), 0.0002)  # LM1's, same beat: not another one
    reqs = flush(g, port, 0.0002)
    assert sum(len(r.tasks) for r in reqs) == 4
    g.on_message(StateDelta(0, [], [], False, None, 0, 0), 0.0003)  # another beat, within one delay
    reqs = flush(g, port, 0.0003)
    assert sorted(t for r in reqs for t in r.tasks) == [14, 15, 16, 17]


def test_same_instant_double_bookings_reach_the_lm_in_random_order():
    winners = set()
    for seed in range(12):
        g, port = gm(matching="scan", full_pull=True, queue="fewest-tasks", repartition=False, pull_overwrites=D)
        port.rng = np.random.default_rng(seed)
        g.attach(port)
        g.on_message(job([0, 1, 2, 3]), 0.0)
        r0, r1 = flush(g, port, 0.0)
        g.on_message(job([10, 11, 12], j=1), 0.1)
        g.on_message(TaskDone(0, [0, 1], [0, 1], None, r0.req), 1.0)
        answer_pull(g, port, 1.001, (r0.req, r1.req))
        (r,) = flush(g, port, 1.001)
        winners.add(tuple(r.tasks[r.workers.index(w)] for w in (0, 1)))
    assert len(winners) > 1  # not always the first booking made


def test_option_needs_scan_full_pull_and_slot_mode():
    with pytest.raises(ValueError, match="pull_overwrites"):
        MeghaOptions(pull_overwrites=True)  # the paper profile offers freed workers, it does not scan
    with pytest.raises(ValueError, match="pull_overwrites"):
        MeghaOptions(profile="megha20", full_pull=False, pull_overwrites=True)
    with pytest.raises(ValueError, match="pull_overwrites"):
        gm(matching="offer", pull_overwrites=D)
    assert MeghaOptions().pull_overwrites is False
    assert MeghaOptions(profile="megha20").pull_overwrites is True  # the authors' 2020 simulator does it
    # the profile's value gives way when what it rests on is overridden
    assert MeghaOptions(profile="megha20", matching="offer").pull_overwrites is False
    with pytest.raises(InputError, match="pull_overwrites"):
        simulate(
            RunConfig(
                scheduler="megha",
                resources=True,
                capacity={"cpu": 4, "mem": 8},
                demand={"cpu": 1, "mem": 1},
                options={"profile": "megha20", "pull_overwrites": True},
                trace="sample:GOOG_subtrace",
                max_jobs=5,
                workers=20,
                gms=2,
                lms=2,
            )
        )
    with pytest.raises(InputError):
        registry.parse_options(registry.get("megha"), {"pull_overwrites": True})


SMALL = dict(trace="sample:GOOG_subtrace", max_jobs=120, workers=400, seed=1, constraints=False)


@pytest.mark.parametrize("sched", ["megha", "megha-central"])
def test_full_run_every_task_exactly_once(sched):
    base = {"profile": "megha20", "pull_overwrites": False}
    runs = {}
    for ow in (False, True):
        cfg = RunConfig(scheduler=sched, gms=4, lms=5, options={**base, "pull_overwrites": ow}, **SMALL)
        r = simulate(cfg)
        assert r.unfinished_reason is None
        assert (r.recorder.finishes[r.feasible] == 1).all()
        runs[ow] = r
    # the unverified bookings booked again are rejected by the LMs
    assert runs[True].counters["inconsistencies"] > runs[False].counters["inconsistencies"]
    again = simulate(RunConfig(scheduler=sched, gms=4, lms=5, options={**base, "pull_overwrites": True}, **SMALL))
    assert np.array_equal(again.recorder.end, runs[True].recorder.end, equal_nan=True)
