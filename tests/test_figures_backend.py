"""The reproductions' figures are written without pyplot: a notebook's backend and figures stay as they were."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "megha"
#: modules allowed to use pyplot: the shared plotting module and the notebook helpers that show figures
PYPLOT_ALLOWED = {"metrics/plots.py", "api.py"}


def draw_every_figure(out: Path) -> list[Path]:
    """Every file-writing figure function of the reproductions, on tiny made-up data; returns the files."""
    from megha.experiments import iot23, megha20, megha_fairness, sirius, sweeps
    from megha.experiments.macrm import burst, sampling, service_time
    from megha.experiments.macrm.common import GROUPS

    out.mkdir(parents=True, exist_ok=True)
    iot23.bars({"a": 1.2, "b": 0.8}, out / "bars.png", "bars", "ratio")
    stats = {"median": 0.5, "mean": 0.6, "p95": 1.1, "p99": 1.4, "max": 2.0, "share_above_1": 0.1}
    load = {"workers": 10, "total": stats, "per_constraint": [stats | {"supply": 4, "tasks": 3}, None]}
    iot23.write_load(load, "tiny", out)
    iot23.fig9_bars({"w1": dict.fromkeys(iot23.FIG9, 0.97), "w2": dict.fromkeys(iot23.FIG9, 1.01)}, out / "f9.png")
    pct = dict.fromkeys(megha20.PERCENTILES, 0.01)
    megha20.percentile_bars({"x": pct, "y": {k: 0.2 for k in pct}}, out / "pct.png", "percentiles")
    rows = [{"workers": w, "repartitions": 3, "preemption_attempts": 5, "preemptions": 2} for w in (200, 500)]
    megha_fairness._bars(rows, out / "fair.png")
    sweeps._lines([1, 10, 100], {"a": [0.1, None, 0.3], "b": [0.2, 0.3, 0.4]}, out / "lines.png", "x", "t", True)
    sweeps._lines(["p", "q"], {"a": [0.1, 0.2]}, out / "cats.png", "x", "t", False, labels=["p", "q"])
    sirius._plot_bars(out / "sirius.png", ["g1", "g2"], {"a": [1.0, 2.0], "b": [2.0, 1.0]}, "s", "title")
    loads = [0.7, 0.8]
    names = ["power of two", "doubling", "adaptive", "adaptive + centralized"]
    doc = {n: {f"{v:.2f}": {"service_mean": 0.01 * (i + 1)} for v in loads} for i, n in enumerate(names)}
    sampling._plot_sampling(doc, loads, out / "sampling.png")
    res = {lab: {f"{int(L * 100)}": {"mean": 0.002 * (i + 1)} for L in GROUPS} for i, lab in enumerate("ab")}
    service_time._plot_groups(res, ["a", "b"], out / "groups.png", "groups")
    res = {lab: {f"{int(L * 100)}": {"5x10": 0.01, "10x10": 0.02} for L in loads} for lab in "ab"}
    burst._plot_burst(res, ["a", "b"], loads, [5, 10], [10], out / "burst.png")
    return sorted(out.glob("*.png"))


def test_figures_leave_the_backend_and_pyplot_alone(tmp_path):
    code = (
        "import sys, runpy, pathlib, matplotlib; matplotlib.use('svg'); import matplotlib.pyplot as plt; "
        "files = runpy.run_path(sys.argv[1])['draw_every_figure'](pathlib.Path(sys.argv[2])); "
        "print(len(files), matplotlib.get_backend(), plt.get_fignums())"
    )
    p = subprocess.run([sys.executable, "-c", code, __file__, str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["11", "svg", "[]"], p.stdout


def test_no_experiment_module_switches_the_backend_or_uses_pyplot():
    bad = re.compile(r"matplotlib\.use\(|pyplot|\bplt\.")
    offenders = [
        f"{path.relative_to(SRC)}:{i}"
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).as_posix() not in PYPLOT_ALLOWED
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert not offenders, f"pyplot or matplotlib.use outside the shared plotting module: {offenders}"
