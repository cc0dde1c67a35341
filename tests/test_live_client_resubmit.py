"""The client's view of which tasks are not running (what it submits again after a GM restart or a loss)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from megha.live.client import LiveClient


def _client(n: int) -> LiveClient:
    cl = LiveClient.__new__(LiveClient)
    cl.n = n
    cl.started = np.zeros(n, dtype=np.int32)
    cl.finished = np.zeros(n, dtype=np.int32)
    cl.known = np.zeros(n, dtype=bool)
    cl.lost = np.zeros(n, dtype=np.int32)
    cl.lost_at = np.zeros(n)
    cl.finished_at = np.zeros(n)
    cl.started_t = np.full(n, -np.inf)
    cl.lost_t = np.full(n, -np.inf)
    cl.started_at = np.zeros(n)
    cl.n_known = 0
    cl.failures, cl.outputs = {}, {}
    cl.counters = __import__("collections").Counter()
    return cl


def test_a_loss_reported_before_the_relaunch_started_does_not_make_the_task_unstarted():
    cl = _client(4)
    i = lambda *x: np.array(x, dtype=np.int64)  # noqa: E731
    cl._apply("lost", i(0), None, "worker host h1 down", 10.0)  # launched to a dead host, never started there
    cl._apply("started", i(0), i(7), "", 10.2)  # the LM relaunched it elsewhere
    cl._apply("started", i(1), i(8), "", 10.0)  # started, then its run was cut short
    cl._apply("lost", i(1), None, "worker host h0 down", 11.0)
    cl._apply("lost", i(2), None, "worker host h0 down", 11.0)  # lost, never started
    cl._apply("started", i(3), i(9), "", 9.0)  # running
    w = SimpleNamespace(task_job=np.arange(4))
    un = cl._unstarted_of(0, np.zeros(4, dtype=np.int64), np.ones(4, dtype=bool), np.ones(4, dtype=bool), w)
    assert un.tolist() == [False, True, True, False]


def _messages(path: str, js: np.ndarray, feasible: np.ndarray, w, gms: int = 2, dead: set[int] | None = None):
    """What the client sends for jobs ``js`` due at once: by the array path or the per-job one."""
    from megha.live.client import MAX_BATCH_JOBS

    cl = LiveClient.__new__(LiveClient)
    cl.run_id = 5
    cl.fair = None  # no fairness shares: jobs of a dead GM go to the others
    cl.counters = __import__("collections").Counter()
    cl.layout = SimpleNamespace(n_gms=gms, gm_address=lambda g: f"gm{g}")
    sent: list = []
    cl.send = lambda dst, msg: sent.append((dst, msg))
    job_gm = np.arange(w.n_jobs) % gms
    dead = dead or set()
    submitted = np.zeros(w.n_tasks, dtype=bool)
    at = np.full(w.n_jobs, np.nan)
    if path == "arrays":
        cl._submit_due(js, job_gm, dead, feasible, submitted, at, w, 1 << 40, 0.0)
    else:
        due: dict[int, list] = {}
        for j in js.tolist():
            g = int(job_gm[j])
            if g in dead:
                alive = [x for x in range(gms) if x not in dead]
                g = alive[j % len(alive)]
                job_gm[j] = g
            lo, hi = int(w.job_first_task[j]), int(w.job_first_task[j] + w.job_num_tasks[j])
            ok = feasible[lo:hi]
            if not ok.any():
                continue
            idx = np.arange(lo, hi, dtype=np.int64)[ok]
            submitted[idx] = True
            due.setdefault(g, []).append((j, idx))
            if len(due[g]) >= MAX_BATCH_JOBS:
                cl._submit_many(due.pop(g), g, w, 1 << 40)
        for g, jobs in due.items():
            cl._submit_many(jobs, g, w, 1 << 40)
    from megha.live import wire

    out = sorted(((dst, wire.encode(m, "client", dst)) for dst, m in sent), key=lambda x: x[0])  # per GM, in order
    return out, submitted.tolist(), job_gm.tolist()


def test_jobs_due_together_are_sent_by_the_array_path_as_by_the_per_job_loop():
    from megha.live.client import synthetic_workload

    rng = np.random.default_rng(0)
    for per_job in (1, 3):
        w = synthetic_workload(700, per_job, 0.2, 1.0, seed=1, jitter=0.2)
        feasible = rng.random(w.n_tasks) > 0.1
        for js in (np.arange(700), np.arange(3, 9), np.array([4, 2])):
            for dead in (set(), {1}):
                assert _messages("arrays", js, feasible, w, dead=dead) == _messages("loop", js, feasible, w, dead=dead)
