"""The starvation remedy (``handoff_after``) in a live deployment, built from the same options as the simulator's:
tasks queued too long at their GM are handed to an LM, which starts them on its next suitable free workers and
counts them among the tasks it holds (exactly once across a GM restart)."""

from __future__ import annotations

import asyncio

import numpy as np

from megha.live.client import LiveClient, one_job, to_run_result
from megha.live.config import LiveConfig, LiveMeghaOptions
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of
from megha.live.masters import LiveLocalMaster
from megha.live.messages import Holding, HostBeat, HostLaunch
from megha.live.runtime import ForwardingRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import Finished
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import Handoff, LaunchRequest, SyncRequest
from megha.schedulers.megha.wiring import megha_parts
from megha.sim.component import RecordingPort


async def _run(cfg: LiveConfig):
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = await LocalDeployment(cfg, layout=layout).start()
    cl = LiveClient(cfg, dep.transport("client"), layout)
    await cl.start()
    try:
        run = await cl.run(one_job(12, 1.0), dc, stall_timeout=60, ready_timeout=60)
        return to_run_result(run, cfg, dc, "one-job")
    finally:
        await cl.close()
        await dep.close()


def test_long_waiting_tasks_are_handed_to_an_lm_live():
    cfg = LiveConfig(
        broker={"kind": "inproc"},
        datacenter={"workers": 4, "constraints": False, "seed": 5},
        megha={"gms": 1, "lms": 2, "handoff_after": 0.3},
        workers={"hosts": 1},
        ha={"lm_standby": False},
    )
    res = asyncio.run(_run(cfg))  # 12 tasks of 1 s on 4 workers: 8 wait at the GM, longer than 0.3 s
    assert res.unfinished_reason is None
    assert (res.recorder.finishes == 1).all()
    assert res.counters["handoffs"] >= 1 and res.counters["handoff_launches"] >= 1


def _lm() -> tuple[LiveLocalMaster, RecordingPort]:
    lay = MeghaLayout.build(Datacenter(worker_masks=np.zeros(2, dtype=np.uint32)), 1, 1)
    parts = megha_parts(LiveMeghaOptions(gms=1, lms=1, handoff_after=1.0), lay)
    lm = parts.lm(0, ForwardingRecorder(), cls=LiveLocalMaster)
    port = RecordingPort()
    lm.attach(port)
    lm.on_start(0.0)
    lm.on_message(HostBeat("a", 1, 0, [0, 1], [], 0.2), 0.0)
    return lm, port


def test_a_handed_over_task_is_held_by_the_lm_exactly_once():
    lm, port = _lm()
    lm.on_message(LaunchRequest(0, 1, [10, 11], [0, 1], [5.0, 5.0], [0, 0]), 0.1)  # every worker busy
    port.take()
    ho = Handoff(0, [12], [1.0], [0], [0], [0.0])
    lm.validate(ho)
    lm.on_message(ho, 0.2)
    assert not port.take(HostLaunch)  # no free worker: it waits at the LM
    lm.on_message(SyncRequest(0), 0.3)  # a restarted GM asks what the LM holds: the waiting task too
    held = [m for _, m in port.take(Holding)]
    assert sorted(held[0].tasks) == [10, 11, 12]
    lm.on_message(ho, 0.4)  # handed over again (a restarted GM had it resubmitted): dropped
    lm.on_message(LaunchRequest(0, 2, [12], [0], [1.0], [0]), 0.5)  # or placed again by a GM: refused
    assert lm.counters["duplicate_launches_refused"] == 2
    port.take()
    lm.on_message(Finished([10], [0], None), 1.0)  # a worker frees: the handed-over task starts there, once
    launched = [m for _, m in port.take(HostLaunch)]
    assert [t for m in launched for t in m.tasks] == [12]
    assert lm.counters["handoff_launches"] == 1
