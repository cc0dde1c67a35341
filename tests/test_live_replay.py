"""`megha live chaos --faults FILE`: a simulator fault schedule replayed against a live deployment (issue 18).

Kinds the live runtime cannot do are refused with the kind named; the worker-host layout that maps ``partition``
faults covers every worker once; a short schedule (fixed seed, generous timeouts) with every live kind loses
nothing and runs nothing twice, and its report has the fields of the simulator's ``faults`` summary."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from megha.errors import InputError
from megha.live.config import LiveConfig
from megha.live.deploy import host_workers, hosts_of_workers, layout_of
from megha.live.replay import check_schedule, expand, replay_config
from megha.live.testing import reaped
from megha.model.faults import load_schedule


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    """Whatever a test starts (nats-server, supervisor, services) is killed when it ends, even when it fails."""
    with reaped():
        yield


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "faults.toml"
    p.write_text(text)
    return p


def test_a_kind_the_live_runtime_cannot_do_is_refused_by_name(tmp_path: Path):
    p = _write(tmp_path, 'seed = 1\n[[fault]]\nat = 1\nkind = "master"\ntarget = 0\n')
    with pytest.raises(InputError, match="'master'") as e:
        check_schedule(load_schedule(p))
    assert "fault 1" in str(e.value) and "broker" in str(e.value)  # names the entry and the kinds it has


def test_a_worker_fault_for_good_is_refused_live(tmp_path: Path):
    p = _write(tmp_path, '[[random]]\nkind = "worker"\nmtbf = 100\n')
    with pytest.raises(InputError, match="finite down_for"):
        check_schedule(load_schedule(p))


def test_cli_reports_a_bad_kind_with_exit_2(tmp_path: Path):
    from typer.testing import CliRunner

    from megha.cli import app

    p = _write(tmp_path, '[[fault]]\nat = 1\nkind = "rm"\n')
    r = CliRunner().invoke(app, ["live", "chaos", "--faults", str(p)])
    assert r.exit_code == 2, r.output
    assert "'rm'" in r.output and "Traceback" not in r.output


def test_hosts_laid_out_by_lm_cover_every_worker_once_and_map_faults():
    cfg = LiveConfig(datacenter={"workers": 100}, megha={"gms": 2, "lms": 2})
    layout = layout_of(cfg)
    seen: list[int] = []
    for h in range(4):
        ws = host_workers(layout, 4, h, "by-lm")
        lm = h % 2
        assert all(layout.lm_lo[lm] <= w < layout.lm_hi[lm] for w in ws)  # one LM's workers only
        seen += ws
    assert sorted(seen) == list(range(100))
    assert hosts_of_workers(layout, 4, [0], "by-lm") == [0]
    assert hosts_of_workers(layout, 4, [99], "by-lm") == [3]


def test_the_schedule_expands_as_the_simulator_draws_it(tmp_path: Path):
    p = _write(
        tmp_path,
        'seed = 4\n[[fault]]\nat = 2\nkind = "worker"\ntarget = 0.05\ndown_for = 1\n'
        '[[random]]\nkind = "gm"\nmtbf = 5\ndown_for = 1\nuntil = 10\n',
    )
    cfg = replay_config(str(tmp_path / "st"))
    a = expand(load_schedule(p), cfg, 20.0)
    b = expand(load_schedule(p), cfg, 20.0)
    assert a == b and a[0].kind in ("worker", "gm")
    w = next(e for e in a if e.kind == "worker")
    assert len(w.targets) == 5 and all(0 <= x < 100 for x in w.targets)


@pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server is not installed")
def test_a_short_fault_file_replayed_live_loses_nothing_and_runs_nothing_twice(tmp_path: Path):
    pytest.importorskip("nats", reason="nats-py is not installed")
    from megha.live.replay import run_fault_file

    p = _write(
        tmp_path,
        "seed = 3\n"
        '[[fault]]\nat = 2.0\nkind = "lm"\ntarget = 0\n'
        '[[fault]]\nat = 4.0\nkind = "gm"\ntarget = 1\ndown_for = 1.5\n'
        '[[fault]]\nat = 6.0\nkind = "partition"\ntarget = 1\ndown_for = 2.0\n'
        '[[fault]]\nat = 9.0\nkind = "worker"\ntarget = [0]\ndown_for = 1.0\n'
        '[[fault]]\nat = 10.0\nkind = "lm"\ntarget = 0\n'
        '[[fault]]\nat = 12.0\nkind = "broker"\ndown_for = 0.5\n',
    )
    doc = asyncio.run(
        asyncio.wait_for(run_fault_file(str(p), seconds=14.0, rate=12.0, state_dir=str(tmp_path / "st")), 600)
    )
    assert doc["lost"] == 0 and doc["duplicated"] == 0, doc
    assert doc["completed"] == doc["submitted"] > 100
    kinds = {f["kind"] for f in doc["faults"]}
    assert {"gm", "lm", "partition", "worker", "broker"} <= kinds, doc["faults"]
    fs = doc["fault_summary"]
    for key in ("injected", "by_kind", "task_runs_lost", "tasks_reexecuted", "work_lost_s", "jobs_touched"):
        assert key in fs
    assert fs["injected"] == len(doc["faults"]) and fs["by_kind"]["lm"] >= 1
    assert fs["delay_touched"]["count"] == fs["jobs_touched"]  # every touched job completed
    assert doc["time_scale"] == 1.0


def test_chaos_scenario_is_checked_before_anything_starts(tmp_path):
    from typer.testing import CliRunner

    from megha.cli import app

    r = CliRunner().invoke(app, ["live", "chaos", "--scenario", "nope"])
    assert r.exit_code == 2, r.output
    assert "plain, fairness, handoff" in r.output and "Traceback" not in r.output
    p = _write(tmp_path, '[[fault]]\nat = 1\nkind = "gm"\n')
    r = CliRunner().invoke(app, ["live", "chaos", "--scenario", "fairness", "--faults", str(p)])
    assert r.exit_code == 2, r.output
    assert "--scenario" in r.output and "Traceback" not in r.output
