"""Worker hosts run real tasks: command lines (output captured, exit codes and failures reported) and CPU."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from megha.live.client import LiveClient, one_job, to_run_result
from megha.live.config import LiveConfig
from megha.live.deploy import LocalDeployment, datacenter_of, layout_of


async def _run_job(cfg: LiveConfig, tasks: int, duration: float, kind: str, command: str = ""):
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = await LocalDeployment(cfg, layout=layout).start()
    cl = LiveClient(cfg, dep.transport("client"), layout)
    await cl.start()
    try:
        run = await cl.run(one_job(tasks, duration), dc, kind=kind, command=command, stall_timeout=20)
        return to_run_result(run, cfg, dc, "one-job"), run
    finally:
        await cl.close()
        await dep.close()


def test_command_tasks_capture_output_and_report_exit_codes(tmp_path: Path):
    cfg = LiveConfig(
        broker={"kind": "inproc"},
        datacenter={"workers": 20, "constraints": False},
        megha={"gms": 1, "lms": 2},
        workers={"hosts": 1, "output_dir": str(tmp_path), "allowed_commands": ["sh"]},
        ha={"lm_standby": False},
    )
    res, run = asyncio.run(_run_job(cfg, 4, 0.1, "command", "sh -c 'echo out-{task}; exit {task}'"))
    assert res.unfinished_reason is None
    assert (res.recorder.finishes == 1).all()
    assert sorted(run.failures) == [1, 2, 3] and run.failures[2] == "exit code 2"
    assert res.counters["tasks_failed"] == 3
    assert run.outputs[3].strip() == "out-3"
    logs = sorted(p.read_text().strip() for p in tmp_path.rglob("task*.log"))
    assert logs == ["out-0", "out-1", "out-2", "out-3"]


def test_missing_command_is_a_reported_failure():
    cfg = LiveConfig(
        broker={"kind": "inproc"},
        datacenter={"workers": 10, "constraints": False},
        megha={"gms": 1, "lms": 1},
        workers={"hosts": 1, "allowed_commands": ["/no/such/program"]},
        ha={"lm_standby": False},
    )
    res, run = asyncio.run(_run_job(cfg, 2, 0.1, "command", "/no/such/program {task}"))
    assert res.unfinished_reason is None
    assert all("cannot start" in why for why in run.failures.values()) and len(run.failures) == 2


def test_cpu_tasks_hold_their_worker_for_the_duration():
    cfg = LiveConfig(
        broker={"kind": "inproc"},
        datacenter={"workers": 10, "constraints": False},
        megha={"gms": 1, "lms": 1},
        workers={"hosts": 1},
        ha={"lm_standby": False},
    )
    res, run = asyncio.run(_run_job(cfg, 2, 0.3, "cpu"))
    assert res.unfinished_reason is None and not run.failures
    held = res.recorder.end - res.recorder.start
    assert np.all(held >= 0.3)
