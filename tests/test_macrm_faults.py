"""MACRM's failures (thesis §4.2.4) from fault schedules: the kinds it offers (none twice), each kind recovered as
MACRM's own failure model does (the same run as when driven from Python), the CLI, and clear errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from megha.config import RunConfig
from megha.errors import InputError
from megha.experiments.macrm import cluster, poisson_jobs, shift, slot_background
from megha.metrics.fingerprint import fingerprint
from megha.metrics.report import summarize
from megha.runner import simulate, simulate_inputs
from megha.runner.faults import crash_targets, fault_kinds
from megha.schedulers.macrm.faults import KINDS
from tests.test_conformance import assert_no_overallocation

AT = 6.0  # absolute time of the faults below (the workload starts at 2.5 s + its first gap)


@pytest.fixture(scope="module")
def inputs():
    """100 nodes of 4 cores at 60 % background load, Poisson jobs of 9 one-core tasks (as tests/test_macrm_sim.py)."""
    rng = np.random.default_rng(11)
    dc = cluster(np.full((100, 1), 4.0), slot_background(100, 4, 0.6, rng), ("cpu",), "fault")
    w = shift(poisson_jobs(40, rng, mean_gap=0.25, mean_duration=2.0), 2.5)
    return w, dc


def _run(inputs, faults=None, actions=None):
    w, dc = inputs
    cfg = RunConfig(
        scheduler="macrm",
        trace="generated",
        workers=dc.n_workers,
        seed=4,
        constraints=False,
        resources=True,
        capacity={"cpu": 4.0},
        network_delay=0.0005,
        worker_report_delay=0.0005,
        options={"trackers": 2},
        stall_timeout=3600.0,
        faults=faults,
    )
    r = simulate_inputs(cfg, w, dc, actions=actions)
    assert r.unfinished_reason is None, r.unfinished_reason
    assert (r.recorder.finishes[r.feasible] == 1).all()
    assert_no_overallocation(r)
    return r


def _at(inputs) -> float:
    return AT - float(inputs[0].job_arrival.min())  # schedule times count from the first arrival


def test_the_kinds_macrm_offers_are_its_own_and_none_twice(inputs) -> None:
    """The thesis's failures replace the generic crash of the agents they concern (no 'macrm-tracker' beside
    'tracker'); the job managers' per-job slots, the supervisor and the runtime offer none."""
    box = {}

    def grab(engine) -> None:
        box["engine"] = engine

    w, dc = inputs
    cfg = RunConfig(scheduler="macrm", trace="generated", workers=100, resources=True, capacity={"cpu": 4.0}, seed=0)
    simulate_inputs(cfg.model_copy(update={"max_jobs": 1}), w, dc, instrument=grab)
    comps = [c for a, c in box["engine"].components.items() if a not in ("source", "watchdog")]
    kinds = fault_kinds(comps, SimpleNamespace(kinds=KINDS))
    assert sorted(kinds) == ["arbitrator", "jm", "macrm-client", "node", "tracker", "worker"]
    assert sorted(crash_targets(comps)) == ["macrm-client"]


@pytest.mark.parametrize("kind", ["node", "worker"])
def test_a_node_fault_is_detected_by_heartbeats_and_its_tasks_rerun_elsewhere(inputs, kind) -> None:
    faults = {"seed": 3, "fault": [{"at": _at(inputs), "kind": kind, "target": [3, 17, 42, 77, 90], "down_for": 5}]}
    r = _run(inputs, faults)
    c = r.counters
    assert c["macrm_tracker_nodes_lost"] == 5 and c["macrm_arb_nodes_lost"] == 5
    lost = c["macrm_nm_tasks_lost_on_nodes"]
    assert r.recorder.fault_kills.sum() == lost and c["macrm_jm_tasks_lost_on_nodes"] == lost
    (e,) = r.faults
    assert e["workers"] == [3, 17, 42, 77, 90]
    assert e["recovered_at"] is None and e["down_for"] == np.inf  # MACRM models no repair: down_for is ignored
    f = summarize(r)["faults"]
    assert f["injected"] == 1 and f["by_kind"] == {kind: 1}
    if lost:
        assert f["tasks_reexecuted"] > 0 and f["work_lost_s"] > 0
        rerun = np.flatnonzero(r.recorder.fault_kills)
        assert not np.isin(r.recorder.worker[rerun], e["workers"]).any()


def test_schedule_and_python_actions_give_the_same_run(inputs) -> None:
    """A schedule's tracker, arbitrator and job-manager faults are MACRM's own failures: the run is the one that
    calling MacrmFaults from Python at the same times gives."""
    at = _at(inputs)
    faults = {
        "fault": [
            {"at": at, "kind": "tracker", "target": 1},
            {"at": at + 2, "kind": "arbitrator"},
            {"at": at + 4, "kind": "jm", "target": 0},
        ]
    }
    a = _run(inputs, faults)

    def tracker(engine, dep, now):
        dep.extras["macrm"].kill_tracker(1)

    def arbitrator(engine, dep, now):
        dep.extras["macrm"].kill_arbitrator()

    def jm(engine, dep, now):
        f = dep.extras["macrm"]
        next(j for j in range(40) if f.kill_jm(j))

    b = _run(inputs, actions=[(AT, tracker), (AT + 2, arbitrator), (AT + 4, jm)])
    assert fingerprint(a) == fingerprint(b)
    for k in ("macrm_tracker_restarts", "macrm_arbitrator_restarts", "macrm_tracker_jms_lost", "macrm_arb_jm_restarts"):
        assert a.counters[k] == b.counters[k]
    assert a.counters["macrm_tracker_restarts"] == 1 and a.counters["macrm_arbitrator_restarts"] == 1
    assert a.counters["macrm_tracker_jms_lost"] >= 1
    assert [e["kind"] for e in a.faults] == ["tracker", "arbitrator", "jm"]


def test_a_jm_fault_on_a_job_without_one_kills_the_next_running_one(inputs) -> None:
    r = _run(inputs, {"fault": [{"at": _at(inputs), "kind": "jm", "target": 39}]})  # job 39 has not arrived yet
    assert r.counters["macrm_tracker_jms_lost"] == 1 and r.counters["macrm_arb_jm_restarts"] == 1


def test_random_faults_of_every_kind(inputs) -> None:
    faults = {
        "seed": 5,
        "random": [
            {"kind": "worker", "mtbf": 2000.0},
            {"kind": "jm", "mtbf": 40.0},
            {"kind": "tracker", "mtbf": 8.0},
            {"kind": "arbitrator", "mtbf": 8.0},
        ],
    }
    r = _run(inputs, faults)
    assert summarize(r)["faults"]["injected"] >= 3


def test_unknown_kinds_name_the_macrm_kinds(inputs) -> None:
    with pytest.raises(InputError, match=r"no component of kind 'gm'; its fault kinds: arbitrator, jm, macrm-client"):
        _run(inputs, {"fault": [{"at": 1, "kind": "gm"}]})
    with pytest.raises(InputError, match=r"no component of kind 'macrm-tracker'"):
        _run(inputs, {"fault": [{"at": 1, "kind": "macrm-tracker"}]})


def test_cli_runs_a_macrm_fault_file(tmp_path) -> None:
    from typer.testing import CliRunner

    from megha.cli import app

    f = tmp_path / "f.toml"
    f.write_text(
        'seed = 1\n[[fault]]\nat = 3\nkind = "node"\ntarget = 0.05\n'
        '[[fault]]\nat = 5\nkind = "tracker"\ntarget = 0\n[[fault]]\nat = 8\nkind = "arbitrator"\n'
    )
    out = tmp_path / "o"
    args = ["simulate", "-s", "macrm", "--resources", "-t", "sample:YH_small", "--workers", "100", "--max-jobs", "30"]
    r = CliRunner().invoke(app, [*args, "--faults", str(f), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "summary.json").read_text())
    assert doc["faults"]["injected"] == 3 and doc["faults"]["by_kind"] == {"node": 1, "tracker": 1, "arbitrator": 1}
    assert doc["completed"]


def test_python_api_and_sweep_config_take_the_schedule() -> None:
    """The schedule is a RunConfig field: the Python API and sweeps (which build RunConfigs) drive MACRM's faults."""
    cfg = RunConfig(
        scheduler="macrm",
        trace="sample:YH_small",
        workers=100,
        max_jobs=20,
        resources=True,
        faults={"fault": [{"at": 2, "kind": "tracker", "target": 0}]},
    )
    r = simulate(cfg)
    assert r.unfinished_reason is None and r.counters["macrm_tracker_restarts"] == 1
