"""``megha simulate --no-plots`` writes the summary and tables without the figures (and without loading
Matplotlib); the default writes all three figures."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from megha.cli import app

runner = CliRunner()
FIGURES = ("delay_cdf.png", "utilization.png", "starvation.png")


def test_no_plots_writes_the_tables_and_no_figure(tmp_path, tiny_trace):
    code = (
        "import sys; from megha.cli import app; from typer.testing import CliRunner;"
        f"r = CliRunner().invoke(app, ['simulate', '-s', 'yarn', '-t', {str(tiny_trace)!r}, '--workers', '20', '-q',"
        f" '--no-plots', '--out', {str(tmp_path / 'a')!r}]);"
        "assert r.exit_code == 0, r.output; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    names = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"summary.json", "jobs.parquet", "tasks.parquet", "utilization.parquet"} <= names
    assert not names & set(FIGURES)
    r = runner.invoke(
        app, ["simulate", "-s", "yarn", "-t", str(tiny_trace), "--workers", "20", "-q", "--out", str(tmp_path / "b")]
    )
    assert r.exit_code == 0, r.output
    assert all((tmp_path / "b" / f).exists() for f in FIGURES)
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert a["fingerprint"] == b["fingerprint"] and a["delay"] == b["delay"]
