"""Megha's compiled placement of a job (``_kernels.place_tasks``) against the task-by-task path it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from megha.metrics.recorder import TaskRecorder
from megha.model.constraints import NUM_CONSTRAINTS
from megha.model.matching import Policy
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import LaunchRequest
from megha.sim.component import RecordingPort


def _pair(lay: MeghaLayout, g: int, n_tasks: int, repartition: bool) -> tuple[GlobalMaster, GlobalMaster]:
    """Two identical GMs: the first places jobs with the kernel, the second task by task (_on_job/_place_slot)."""
    out = []
    for _ in range(2):
        m = GlobalMaster(g, lay, TaskRecorder(np.zeros(n_tasks)), policy=Policy.RANDOM, repartition=repartition)
        m.attach(RecordingPort(seed=5))
        out.append(m)
    assert out[0]._job_kernel is not None
    out[1]._job_kernel = None
    out[1]._handlers[JobArrival] = out[1]._on_job
    return out[0], out[1]


def _state(m: GlobalMaster) -> tuple:
    q = m.queue.q
    queued = [(s, [(k, e[0]) for k, e in q._buckets[s]]) for s in range(q._n_slots)]
    sent = [(d, msg.tasks, msg.workers) for d, msg in m.port.sent if isinstance(msg, LaunchRequest)]
    return (
        m.view.avail.tolist(),
        m.view.n_free,
        bytes(m.view._flag),
        list(m.view.inflight),
        m.rr_int,
        m.rr_ext,
        m.rnd._i,
        list(m.rnd._buf),
        dict(m.counters),
        queued,
        q._heads[: q._n_slots].tolist(),
        q._len,
        sent,
    )


@pytest.mark.parametrize("seed", range(12))
def test_place_tasks_matches_task_by_task(seed):
    rng = np.random.default_rng(seed)
    n_workers = int(rng.integers(40, 400))
    n_lms, n_gms = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    masks = rng.integers(0, 8, n_workers).astype(np.uint32)  # three constraint bits, some workers have none
    lay = MeghaLayout.build(Datacenter(worker_masks=masks), n_lms, n_gms)
    n_jobs, per_job = 12, 40
    n_tasks = n_jobs * per_job
    a, b = _pair(lay, int(rng.integers(0, n_gms)), n_tasks, repartition=bool(seed % 3))
    left = int(rng.integers(1, 30))
    for m in (a, b):  # start near the end of a block of uniforms: placements cross into the next block
        m.rnd.peek()
        m.rnd._i = 4096 - left
    busy = rng.random(n_workers) < rng.random()  # some workers already busy in the view
    for m in (a, b):
        for w in np.flatnonzero(busy).tolist():
            m.view.forget(w)
    t0 = 0
    for j in range(n_jobs):
        n = int(rng.integers(1, per_job + 1))
        jm = rng.integers(0, 8, n).astype(np.uint32)
        if j % 5 == 4:
            jm[0] = 1 << NUM_CONSTRAINTS  # a constraint no worker has
        msg = JobArrival(
            job=j,
            tasks=np.arange(t0, t0 + n, dtype=np.int64),
            durations=rng.random(n),
            masks=jm,
            demands=None,
        )
        t0 += n
        for m in (a, b):
            m.on_message(msg, float(j))
        assert _state(a) == _state(b)
    assert a.view.n_free == int(np.bitwise_count(a.view.avail).sum())
