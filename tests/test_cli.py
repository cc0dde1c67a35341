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
        "cpu_seconds",
        "tasks_per_cpu_second",
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


def _flat(text):
    return " ".join(text.split())


def _cli(*args, cwd=None, env=None):
    import os

    e = {**os.environ, "COLUMNS": "80", **(env or {})}
    return subprocess.run([sys.executable, "-m", "megha.cli", *args], capture_output=True, text=True, cwd=cwd, env=e)


def test_version():
    from megha import __version__

    res = invoke("--version")
    assert res.exit_code == 0 and res.output.strip() == f"megha {__version__}"


def test_compare_with_a_typo_fails_before_creating_anything(tmp_path):
    p = _cli("compare", "--schedulers", "megha,sparow", "--out", "x", cwd=tmp_path)
    assert p.returncode == 2
    assert "did you mean 'sparrow'" in _flat(p.stderr) and "Traceback" not in _flat(p.stderr)
    assert not (tmp_path / "x").exists()
    p = _cli("compare", "--schedulers", "megha", "-o", "polcy=random", "--out", "x", cwd=tmp_path)
    assert p.returncode == 2 and "polcy" in _flat(p.stderr) and not (tmp_path / "x").exists()


def test_simulate_refuses_a_non_empty_out_unless_forced(tmp_path):
    out = tmp_path / "o"
    args = ["simulate", "-s", "ideal", "-t", "sample:YH_small", "-w", "50", "--out", str(out), "--quiet"]
    assert invoke(*args).exit_code == 0
    (out / "stale.txt").write_text("from an earlier run")
    p = _cli(*args)
    assert p.returncode == 2 and "not empty" in _flat(p.stderr) and "--force" in _flat(p.stderr)
    assert (out / "stale.txt").exists()
    assert invoke(*args, "--force").exit_code == 0
    assert not (out / "stale.txt").exists() and (out / "summary.json").is_file()


def test_compare_writes_only_what_it_ran(tmp_path):
    out = tmp_path / "cmp"
    base = ["compare", "-t", "sample:YH_small", "-w", "100", "--out", str(out), "--quiet"]
    assert invoke(*base, "--schedulers", "megha,sparrow,ideal").exit_code == 0
    assert invoke(*base, "--schedulers", "megha").exit_code == 2  # not empty
    assert invoke(*base, "--schedulers", "megha", "--force").exit_code == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["megha"]
    assert {"compare.csv", "compare.json", "delay_cdf.png"} <= {p.name for p in out.iterdir()}


def test_compare_tables_never_show_scientific_notation(tmp_path):
    import re

    res = invoke(
        "compare",
        "--schedulers",
        "megha,sparrow,yarn",
        "-t",
        "sample:YH_small",
        "-w",
        "200",
        "--out",
        str(tmp_path / "c"),
    )
    assert res.exit_code == 0, res.output
    table = res.output[res.output.index("scheduler") :]
    assert not re.search(r"\d[eE][+-]?\d", table), table
    assert re.search(r"\d ms", table) and "%" in table


def test_compare_help_names_the_default_schedulers():
    from megha.schedulers import registry

    res = invoke("compare", "--help")
    assert res.exit_code == 0
    defaults = [n for n in registry.names() if registry.get(n).in_compare]
    text = " ".join(res.output.split())
    assert "By default it runs " + ", ".join(defaults) in text
    assert "every scheduler" not in text


def test_schedulers_shows_descriptions_wrapped_not_cut():
    p = _cli("schedulers")
    assert p.returncode == 0
    assert "…" not in p.stdout
    assert all(len(line) <= 80 for line in p.stdout.splitlines())
    assert "LM update period" in " ".join(p.stdout.split())  # a Field description of megha's options
    p = _cli("schedulers", "sparow")
    assert p.returncode == 2 and "did you mean 'sparrow'" in _flat(p.stderr)


def test_did_you_mean_for_traces(tmp_path):
    p = _cli("simulate", "-t", "sample:YH_smal", "-w", "10", "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "did you mean 'sample:YH_small'" in _flat(p.stderr)
    assert not (tmp_path / "o").exists()


def test_simulate_config_file(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        'scheduler = "sparrow"\ntrace = "sample:YH_small"\nworkers = 300\nseed = 4\n[options]\nprobe_ratio = 3\n'
    )
    res = invoke("simulate", "--config", str(cfg), "--out", str(tmp_path / "a"), "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert (s["scheduler"], s["workers"], s["seed"]) == ("sparrow", 300, 4)
    assert s["config"]["options"]["probe_ratio"] == 3
    # the command line wins over the file
    res = invoke("simulate", "--config", str(cfg), "-w", "200", "--seed", "0", "--out", str(tmp_path / "b"), "--json")
    s = json.loads(res.output)
    assert (s["scheduler"], s["workers"], s["seed"]) == ("sparrow", 200, 0)
    res = invoke("simulate", "--config", str(cfg), "-s", "ideal", "--out", str(tmp_path / "c"))
    assert res.exit_code == 2  # probe_ratio (from the file) is not an option of ideal
    assert "--config" in invoke("simulate", "--help").output


def test_trace_info_has_units():
    res = invoke("trace", "info", "sample:YH_small")
    assert res.exit_code == 0
    assert " s" in res.output and "%" in res.output and "e+" not in res.output


def test_truncated_gzip_trace_is_a_clear_error(tmp_path):
    from megha.samples import resolve

    bad = tmp_path / "cut.tr.gz"
    bad.write_bytes(resolve("sample:YH1_sub").read_bytes()[:3000])
    # a path relative to the run's directory: an absolute temporary path (longer under pytest-xdist) would be
    # folded inside the file name at 80 columns
    p = _cli("simulate", "-t", bad.name, "-w", "10", "--out", "o", cwd=tmp_path)
    assert p.returncode == 2 and "truncated gzip" in _flat(p.stderr) and "cut.tr.gz" in _flat(p.stderr)
    assert "Aborted" not in p.stderr + p.stdout


def test_huge_task_duration_is_rejected_at_load(tmp_path):
    bad = tmp_path / "huge.tr"
    bad.write_text("0 1 1.0 1.0\n1 2 1.0 1.0 1e12\n")
    p = _cli("simulate", "-t", bad.name, "-w", "10", "--out", "o", cwd=tmp_path)  # relative: see above
    assert p.returncode == 2
    assert "huge.tr:2" in _flat(p.stderr) and "duration 2" in _flat(p.stderr)


def test_did_you_mean_for_experiments():
    p = _cli("reproduce", "iot23-gogle", "--quick")
    assert p.returncode == 2 and "did you mean 'iot23-google'" in _flat(p.stderr)


def test_schedulers_shows_fidelity_profiles(monkeypatch):
    from megha.schedulers import registry

    registry.names()
    spec = registry.get("sparrow")
    monkeypatch.setattr(spec, "profiles", {"thesis": "probes answered in arrival order; no cancellation messages"})
    res = runner.invoke(app, ["schedulers", "sparrow"], catch_exceptions=False, env={"COLUMNS": "80"})
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert "profiles (-o profile=NAME)" in text and "thesis: probes answered in arrival order" in text


def test_simulate_as_a_process_writes_everything_and_exits_cleanly(tmp_path) -> None:
    """The console script ends a finished simulate without the interpreter's teardown: stdout (here the JSON
    summary) must still arrive whole, the exit status must be the command's, and the outputs must be on disk."""
    import json as _json
    import subprocess
    import sys

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "megha.cli", "simulate", "-s", "ideal", "-t", "sample:YH_small", "-w", "200"]
    done = subprocess.run([*cmd, "--out", str(out), "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _json.loads(done.stdout)["tasks"] == 183
    assert (out / "summary.json").exists() and (out / "tasks.parquet").exists()
    bad = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "not empty" in bad.stdout + bad.stderr
