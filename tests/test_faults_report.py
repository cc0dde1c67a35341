"""What faults cost, as users see it: the compare table and compare.csv, and the faults reproduction."""

from __future__ import annotations

import csv
import json

from typer.testing import CliRunner

from megha.cli import app


def test_compare_with_faults_prints_and_writes_their_cost(tmp_path):
    faults = tmp_path / "f.toml"
    faults.write_text('seed = 3\n[[fault]]\nat = 5\nkind = "worker"\ntarget = 0.3\ndown_for = 60\n')
    out = tmp_path / "o"
    args = ["compare", "--schedulers", "megha,megha-central", "-t", "sample:YH_small", "--workers", "100"]
    r = CliRunner().invoke(app, [*args, "--faults", str(faults), "--out", str(out)], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    assert "what the faults cost" in r.output
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert [row["scheduler"] for row in rows] == ["megha", "megha-central"]
    assert all(int(row["faults_injected"]) == 1 for row in rows)
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "plain")])
    assert r.exit_code == 0 and "what the faults cost" not in r.output
    assert "faults_injected" not in (tmp_path / "plain" / "compare.csv").read_text()


def test_faults_reproduction_runs_every_scheduler_and_checks_the_papers_claims(tmp_path):
    from megha.experiments.registry import ReproContext, run_experiment

    ctx = ReproContext(
        out=tmp_path,
        seed=1,
        log=lambda s: None,
        extra={"max_jobs": 60, "workers": 4000, "gm_at_h": 0.5, "lm_at_h": 1.0, "schedulers": "megha,yarn"},
    )
    doc = run_experiment("megha20-faults", ctx)
    assert set(doc["runs"]) == {"megha", "yarn"}
    m = doc["runs"]["megha"]
    assert m["exactly_once"] and m["completed"]
    assert {e["kind"] for e in m["fault_events"]} == {"gm", "lm"}
    assert m["counters"]["restarts"] == 1
    claims = {c["id"]: c for c in doc["claims"]}
    assert claims["gm-stateless"]["holds"] is True and claims["lm-standby"]["holds"] is True
    assert (tmp_path / "faults_table.md").read_text().startswith("| scheduler | crashed |")
    assert json.loads((tmp_path / "summary.json").read_text())["experiment"] == "megha20-faults"


def test_schedulers_lists_the_fault_kinds_a_schedule_can_name():
    from megha.runner.simulate import fault_kinds_of

    assert list(fault_kinds_of("megha")) == ["gm", "lm", "worker", "partition"]
    assert "rm" in fault_kinds_of("yarn")
    r = CliRunner().invoke(app, ["schedulers", "megha"], env={"COLUMNS": "120"})
    assert r.exit_code == 0 and "fault kinds (--faults): gm, lm, worker, partition" in r.output
