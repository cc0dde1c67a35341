"""End-to-end tests of the `megha` command."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from megha.cli import app

runner = CliRunner()


def invoke(*args):
    res = runner.invoke(app, list(args), catch_exceptions=False)
    return res


def test_help_lists_commands():
    res = invoke("--help")
    assert res.exit_code == 0
    for cmd in ("simulate", "compare", "trace", "schedulers", "reproduce"):
        assert cmd in res.output


def test_simulate_writes_every_output(tmp_path, tiny_trace):
    out = tmp_path / "run"
    res = invoke(
        "simulate",
        "-s",
        "megha",
        "-t",
        str(tiny_trace),
        "-w",
        "20",
        "--gms",
        "2",
        "--lms",
        "2",
        "--out",
        str(out),
        "--csv",
        "--quiet",
    )
    assert res.exit_code == 0, res.output
    for f in (
        "summary.json",
        "jobs.parquet",
        "tasks.parquet",
        "utilization.parquet",
        "jobs.csv",
        "tasks.csv",
        "delay_cdf.png",
    ):
        assert (out / f).exists(), f
    s = json.loads((out / "summary.json").read_text())
    for key in (
        "scheduler",
        "trace",
        "workers",
        "seed",
        "jobs",
        "tasks",
        "tasks_infeasible",
        "delay",
        "utilization_mean",
        "wall_seconds",
        "counters",
        "config",
    ):
        assert key in s
    assert set(s["delay"]) >= {"mean", "p50", "p90", "p99", "p999", "max"}
    assert s["jobs"] == 5 and s["tasks"] == 9 and s["workers"] == 20
    assert s["config"]["options"]["policy"] == "random"


def test_simulate_json_and_options(tmp_path):
    res = invoke(
        "simulate",
        "-s",
        "megha",
        "-t",
        "sample:YH_small",
        "--out",
        str(tmp_path / "o"),
        "--json",
        "-o",
        "policy=min-constraints",
        "-o",
        "heartbeat=10",
    )
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    # idle datacenter: every job 1.5 ms
    assert abs(s["delay"]["max"] - 0.0015) < 1e-9 and abs(s["delay"]["p50"] - 0.0015) < 1e-9
    assert s["config"]["options"]["heartbeat"] == 10.0


def test_same_command_same_bytes(tmp_path, tiny_trace):
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}"
        invoke(
            "simulate",
            "-s",
            "megha",
            "-t",
            "sample:GOOG_subtrace",
            "--max-jobs",
            "50",
            "-w",
            "300",
            "--out",
            str(out),
            "--quiet",
            "--csv",
        )
        outs.append((out / "tasks.csv").read_bytes())
    assert outs[0] == outs[1]


def test_compare_prints_table_and_plot(tmp_path):
    out = tmp_path / "cmp"
    res = invoke("compare", "--schedulers", "megha,megha-central,ideal", "-t", "sample:YH_small", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "megha-central" in res.output and "p99" in res.output
    assert (out / "delay_cdf.png").stat().st_size > 1000
    assert "scheduler" in (out / "compare.csv").read_text().splitlines()[0]


def test_compare_runs_the_google_sample_in_the_papers_setting(tmp_path):
    # the IoT 2023 paper ran the Google sub-trace on 20,000 workers; Megha then gets 5 GMs x 10 LMs
    out = tmp_path / "cmp"
    res = invoke("compare", "--schedulers", "megha,pigeonc", "--max-jobs", "3", "--out", str(out), "--quiet")
    assert res.exit_code == 0, res.output
    megha = json.loads((out / "megha" / "summary.json").read_text())
    assert megha["workers"] == 20000 and (megha["deployment"]["gms"], megha["deployment"]["lms"]) == (5, 10)
    pigeonc = json.loads((out / "pigeonc" / "summary.json").read_text())
    assert pigeonc["workers"] == 20000


def test_trace_info_and_convert(tmp_path, tiny_trace):
    res = invoke("trace", "info", str(tiny_trace), "--json", "-w", "4")
    assert res.exit_code == 0
    info = json.loads(res.output)
    assert info["jobs"] == 5 and info["tasks"] == 9
    pq = tmp_path / "t.parquet"
    assert invoke("trace", "convert", str(tiny_trace), str(pq)).exit_code == 0
    res = invoke("simulate", "-s", "ideal", "-t", str(pq), "-w", "4", "--out", str(tmp_path / "o"), "--json")
    assert json.loads(res.output)["tasks"] == 9


def test_schedulers_lists_megha():
    res = invoke("schedulers")
    assert res.exit_code == 0 and "megha-central" in res.output


def test_bad_trace_exits_nonzero_naming_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.tr"
    bad.write_text("0 2 1.0 1.0 2.0\n1 3 1.0 1.0 x 2.0\n")
    p = subprocess.run(
        [sys.executable, "-m", "megha.cli", "simulate", "-s", "megha", "-t", str(bad), "-w", "10"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert "bad.tr:2" in p.stderr and "duration 2" in p.stderr


def test_unknown_scheduler_and_bad_option(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "megha.cli", "simulate", "-s", "nope", "-t", "sample:YH_small"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "unknown scheduler" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "megha.cli", "simulate", "-s", "megha", "-t", "sample:YH_small", "-o", "polcy=random"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "polcy" in p.stderr
