"""Fault schedules injected into simulated runs: component crashes for every scheduler, the cost in summary.json,
clear errors for kinds a scheduler does not have."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.errors import InputError
from megha.metrics.report import summarize
from megha.runner import simulate
from megha.runner.faults import crash_targets
from megha.schedulers import registry
from tests.tracegen import write_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    rng = np.random.default_rng(5)
    jobs = [(float(i) * 2.0, [float(x) for x in rng.uniform(1, 20, size=rng.integers(1, 12))]) for i in range(40)]
    return write_trace(jobs, tmp_path_factory.mktemp("faults") / "t.tr")


def _cfg(trace, scheduler, faults, **kw):
    if "slot" not in registry.get(scheduler).modes:
        kw["resources"] = True
    return RunConfig(scheduler=scheduler, trace=str(trace), workers=60, gms=2, lms=3, seed=1, faults=faults, **kw)


def test_a_gm_and_an_lm_crash_delay_jobs_but_every_task_finishes_once(trace):
    faults = {
        "fault": [
            {"at": 10, "kind": "gm", "target": 0, "down_for": 15},
            {"at": 30, "kind": "lm", "target": 1, "down_for": 5},
        ]
    }
    res = simulate(_cfg(trace, "megha", faults))
    assert res.unfinished_reason is None
    assert (res.recorder.finishes[res.feasible] == 1).all()
    doc = summarize(res)
    f = doc["faults"]
    assert f["injected"] == 2 and f["by_kind"] == {"gm": 1, "lm": 1}
    assert [e["recovery_s"] for e in f["events"]] == pytest.approx([15, 5])
    assert f["jobs_touched"] > 0 and f["delay_touched"]["count"] == f["jobs_touched"]
    base = summarize(simulate(_cfg(trace, "megha", None)))
    assert "faults" not in base
    assert doc["delay"]["max"] > base["delay"]["max"]  # a 15 s GM outage costs something


def test_unknown_kinds_and_targets_are_clear_errors(trace):
    with pytest.raises(InputError, match=r"scheduler 'sparrow' has no component of kind 'gm'; its fault kinds: .*"):
        simulate(_cfg(trace, "sparrow", {"fault": [{"at": 1, "kind": "gm"}]}))
    with pytest.raises(InputError, match=r"fault 1: target: id 7 is out of range \(0..1\)"):
        simulate(_cfg(trace, "megha", {"fault": [{"at": 1, "kind": "gm", "target": 7}]}))


# MACRM creates a job manager per job and has its own failure model (megha.schedulers.macrm.faults), not yet offered
# through fault schedules
GENERIC = [n for n in registry.names() if not registry.get(n).unbounded and registry.get(n).family != "macrm"]


@pytest.mark.parametrize("name", GENERIC)
def test_random_crashes_of_every_component_kind_lose_no_task(trace, name):
    """Every component of the scheduler crashes at random (mean 20 s between crashes per kind, down 3 s): every
    feasible task still completes exactly once."""
    kinds = _kinds_of(trace, name)
    assert kinds, f"{name} has no component a schedule can crash"
    faults = {"seed": 2, "random": [{"kind": k, "mtbf": 20.0 * n, "down_for": 3.0} for k, n in kinds.items()]}
    res = simulate(_cfg(trace, name, faults))
    assert res.unfinished_reason is None, res.unfinished_reason
    assert (res.recorder.finishes[res.feasible] == 1).all()
    assert summarize(res)["faults"]["injected"] > 0


def _kinds_of(trace, name: str) -> dict[str, int]:
    seen: dict[str, int] = {}

    def grab(engine):
        comps = [c for c in engine.components.values() if c.address not in ("source", "watchdog")]
        seen.update({k: len(v) for k, v in crash_targets(comps).items()})

    simulate(_cfg(trace, name, None, max_jobs=1), instrument=grab)
    return seen
