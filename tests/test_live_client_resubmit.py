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
