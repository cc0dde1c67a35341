"""Fault schedules injected into simulated runs: component crashes for every scheduler, the cost in summary.json,
clear errors for kinds a scheduler does not have."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megha.config import RunConfig
from megha.errors import InputError
from megha.metrics.report import summarize
from megha.runner import simulate
from megha.runner.faults import crash_targets
from megha.schedulers import registry
from tests.test_conformance import check, config, job_st, runs_of
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


GENERIC = [n for n in registry.names() if not registry.get(n).unbounded]


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


# --- worker faults: families that offer them ---------------------------------------------------------------------
WORKER_FAULTS = [
    ("megha", "slot"),
    ("megha", "resource"),
    ("megha-central", "slot"),
    ("pigeonc", "slot"),
    ("pigeon", "slot"),
    ("sparrow", "slot"),
    ("sparrow", "resource"),
    ("flow", "slot"),
    ("flow", "resource"),
    ("macrm", "resource"),  # its nodes never come back (MACRM models no repair): stranded if needed
    ("yarn", "slot"),
    ("yarn", "resource"),
]
FAULT_KINDS = {
    "megha": ["worker", "partition", "gm", "lm"],
    "megha-central": ["worker", "gm", "lm"],
    "pigeonc": ["worker", "partition", "master", "distributor"],
    "pigeon": ["worker", "partition", "master", "distributor"],
    "sparrow": ["worker", "scheduler"],
    "flow": ["worker", "scheduler"],
    "macrm": ["worker", "node", "jm", "tracker", "arbitrator", "macrm-client"],
    "yarn": ["worker", "rm"],
}


def assert_no_run_on_a_dead_worker(r) -> None:
    """No task starts on a worker while it is down."""
    task, worker, start, _ = runs_of(r)
    for e in r.faults:
        back = np.inf if e["recovered_at"] is None else e["recovered_at"]
        hit = np.isin(worker, e["workers"]) & (start > e["at"] + 1e-9) & (start < back - 1e-9)
        assert not hit.any(), f"tasks {task[hit][:5].tolist()} started on a dead worker"


def assert_stranded_tasks_have_no_live_worker(r) -> None:
    """A stranded task is one no worker left alive can run, and every other feasible task finished."""
    dead: set[int] = set()
    for e in r.faults:
        if e["recovered_at"] is None:
            dead |= set(e["workers"])
    alive = np.array([w not in dead for w in range(r.datacenter.n_workers)])
    wm = r.datacenter.worker_masks[alive]
    for t in r.stranded.tolist():
        m = int(r.workload.masks[t])
        assert not ((m & ~wm) == 0).any(), f"task {t} was stranded although a live worker fits it"


@pytest.mark.parametrize(("name", "mode"), WORKER_FAULTS, ids=[f"{n}-{m}" for n, m in WORKER_FAULTS])
def test_random_worker_and_component_faults_lose_no_task(name, mode, tmp_path):
    """Random schedules of worker deaths (some for good), partitions and component crashes: every feasible task
    completes exactly once or is reported stranded (no live worker fits it), no worker is over-allocated (lost runs
    included), constraints hold, and nothing starts on a dead worker."""
    kinds = FAULT_KINDS[name]

    @given(
        jobs=st.lists(job_st, min_size=1, max_size=20),
        workers=st.integers(4, 30),
        seed=st.integers(0, 10_000),
        faults=st.lists(
            st.tuples(st.sampled_from(kinds), st.floats(0, 10), st.sampled_from([0.0, 0.5, 3.0, 20.0, None])),
            min_size=1,
            max_size=6,
        ),
    )
    @settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    def prop(jobs, workers, seed, faults) -> None:
        trace = write_trace(jobs, tmp_path / "w.tr")
        cfg = config(name, mode, trace, workers, 2, seed)
        schedule = {
            "seed": seed,
            "fault": [
                {
                    "at": at,
                    "kind": k,
                    "target": 0.3 if k == "worker" else "random",
                    **({"down_for": d} if d is not None else {}),
                }
                for k, at, d in faults
            ],
        }
        r = simulate(cfg.model_copy(update={"faults": schedule}))
        assert_stranded_tasks_have_no_live_worker(r)
        assert (r.recorder.finishes[r.stranded] == 0).all()
        if r.stranded.size:  # the checks below hold for every task that was not stranded
            r.feasible = r.feasible.copy()
            r.feasible[r.stranded] = False
            r.counters["tasks_infeasible"] += int(r.stranded.size)
            r.recorder.launches[r.stranded] = 0  # a stranded task may have run (and lost its run) before
            r.counters = {k: v for k, v in r.counters.items() if not k.endswith("left_queued")}  # they wait there
        check(r, unbounded=False)
        assert_no_run_on_a_dead_worker(r)

    prop()


def test_a_task_lost_while_its_gm_is_down_is_placed_by_the_restarted_gm(trace):
    """Regression: a restarted GM reused request ids its LMs had acknowledged already, so the LM's rejection of a
    re-placed task was taken for an acknowledgement and the task was never launched again."""
    faults = {
        "fault": [
            {"at": 4, "kind": "gm", "target": 0, "down_for": 10},
            {"at": 6, "kind": "partition", "target": 0, "down_for": 4},
        ]
    }
    res = simulate(_cfg(trace, "megha", faults))
    assert res.unfinished_reason is None
    f = summarize(res)["faults"]
    assert f["tasks_reexecuted"] > 0 and f["work_lost_s"] > 0
    assert (res.recorder.finishes[res.feasible] == 1).all()


def test_cli_faults_file_reports_the_cost_and_bad_files_exit_2(tmp_path):
    from typer.testing import CliRunner

    from megha.cli import app

    good = tmp_path / "f.toml"
    good.write_text('seed = 2\n[[fault]]\nat = 5\nkind = "worker"\ntarget = 0.3\ndown_for = 10\n')
    out = tmp_path / "o"
    args = ["simulate", "-s", "megha", "-t", "sample:YH_small", "--workers", "100", "--gms", "2", "--lms", "4"]
    r = CliRunner().invoke(app, [*args, "--faults", str(good), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "summary.json").read_text())
    assert doc["faults"]["injected"] == 1 and doc["faults"]["tasks_reexecuted"] > 0 and doc["completed"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[fault]]\nat = "soon"\nkind = "worker"\n')
    r = CliRunner().invoke(app, [*args, "--faults", str(bad), "--out", str(tmp_path / "o2"), "-q"])
    assert r.exit_code == 2 and "fault 1: field 'at': expected a number" in " ".join(r.output.split())
    assert not (tmp_path / "o2").exists()


def test_a_gm_crash_restarts_the_gm_and_takes_no_worker_down():
    """Regression: a ``gm`` fault was also applied as the failure of the workers numbered like its targets (GM 0
    took worker 0 down for good, killing its tasks), and the restarted GM's ``restarts`` counter was never seen."""
    cfg = RunConfig(
        scheduler="megha",
        trace="sample:YH1_sub",
        workers=2000,
        max_jobs=300,
        seed=1,
        faults={"fault": [{"at": 100, "kind": "gm", "target": 0, "down_for": 5}]},
    )
    res = simulate(cfg)
    assert res.counters.get("workers_failed", 0) == 0 and res.recorder.fault_kills.sum() == 0
    assert res.counters["restarts"] == 1
    assert res.faults[0]["workers"] == []


@pytest.mark.parametrize("name", ["pigeonc", "sparrow"])
def test_pigeonc_and_sparrow_relaunch_the_tasks_lost_with_their_workers(trace, name):
    """A third of the workers die while tasks run on them, a master crashes (PigeonC): the lost runs are counted
    and thrown away, their tasks run again elsewhere or after the workers are back, each completes exactly once."""
    faults = {"seed": 3, "fault": [{"at": 10, "kind": "worker", "target": 0.3, "down_for": 15}]}
    if name == "pigeonc":
        faults["fault"].append({"at": 12, "kind": "master", "target": 0, "down_for": 5})
    res = simulate(_cfg(trace, name, faults))
    assert res.unfinished_reason is None
    assert (res.recorder.finishes[res.feasible] == 1).all()
    f = summarize(res)["faults"]
    assert f["tasks_reexecuted"] > 0 and f["work_lost_s"] > 0 and f["tasks_stranded"] == 0
    assert_no_run_on_a_dead_worker(res)
