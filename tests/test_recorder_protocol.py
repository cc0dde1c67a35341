"""The simulator's and the live runtime's recorders implement one Recorder protocol."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from megha.live.runtime import ForwardingRecorder
from megha.metrics.recorder import Recorder, TaskRecorder

METHODS = [n for n, v in vars(Recorder).items() if callable(v) and not n.startswith("_")]


@pytest.mark.parametrize("rec", [TaskRecorder(np.zeros(3)), ForwardingRecorder()], ids=["sim", "live"])
def test_recorders_implement_the_protocol(rec):
    assert isinstance(rec, Recorder)
    for name in METHODS:
        want = list(inspect.signature(getattr(Recorder, name)).parameters)[1:]
        have = list(inspect.signature(getattr(rec, name)).parameters)
        assert have[: len(want)] == want, f"{type(rec).__name__}.{name}{have} differs from the protocol's {want}"


def test_a_lost_run_is_recorded_with_its_work():
    rec = TaskRecorder(np.zeros(3))
    rec.expect(3)
    rec.started([0, 1], 1.0, [5, 6])
    rec.lost([1], 4.0)
    assert rec.fault_kills.tolist() == [0, 1, 0] and rec.work_lost == pytest.approx(3.0)
    assert rec.running == 1 and np.isnan(rec.start[1]) and rec.worker[1] == -1
