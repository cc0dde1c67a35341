"""summary.json of a small run: utilization over the arrival window, the starvation table, the cost model; the
compare caption and figures."""

from __future__ import annotations

import json

from megha.config import RunConfig
from megha.metrics.report import compare_caption, compare_rows, write_compare_figures, write_run
from megha.runner import simulate


def test_run_summary_has_utilization_starvation_and_processing_model(tiny_trace, tmp_path):
    cfg = RunConfig(scheduler="megha", trace=str(tiny_trace), workers=20, seed=1)
    doc = write_run(simulate(cfg), tmp_path / "run")
    u = doc["utilization"]
    assert u["window"] == "arrivals" and (u["window_start"], u["window_end"]) == (0.0, 10.0)
    assert doc["utilization_mean"] == u["mean"] and 0 < u["mean"] <= 1
    assert len(u["series"]["time"]) == 200
    st = doc["starvation"]
    assert sum(b["jobs"] for b in st["buckets"]) == 5
    assert [b["workers"] for b in st["buckets"]] == ["1", "2-10", "11-20"]
    assert doc["processing_model"]["name"] == "none"
    for f in ("summary.json", "jobs.parquet", "utilization.png", "starvation.png"):
        assert (tmp_path / "run" / f).exists()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["starvation"] == st
    rows = compare_rows([doc])
    assert rows[0]["processing_model"] == "none"
    cap = compare_caption([doc])
    assert "arrival window" in cap and "processing costs: none" in cap
    assert len(write_compare_figures([doc, {**doc, "scheduler": "other"}], tmp_path)) == 2


def test_writing_a_run_does_not_import_pandas(tiny_trace, tmp_path):
    """pyarrow imports pandas on its first array conversion (0.3-0.5 CPU-s); a run's tables do not need it."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from megha.config import RunConfig; from megha.runner import simulate;"
        "from megha.metrics.report import write_run;"
        f"cfg = RunConfig(scheduler='megha', trace={str(tiny_trace)!r}, workers=20);"
        f"write_run(simulate(cfg), Path({str(tmp_path)!r}), csv=False, plots=False); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "False"
    import pyarrow.parquet as pq

    tasks = pq.read_table(tmp_path / "tasks.parquet")
    assert tasks.schema.field("feasible").type == "bool" and tasks.column("feasible").null_count == 0


def test_log_axes_label_decades_in_plain_text():
    """Per-run figures label log axes 10⁻³ ... without building Matplotlib's mathtext parser."""
    import numpy as np

    from megha.metrics import plots

    assert [plots.decade_label(x) for x in (1e-3, 1.0, 100.0, 2.0, 0.0)] == ["10⁻³", "10⁰", "10²", "", ""]
    fig, ax = plots.new_figure()
    plots.draw_cdfs(ax, {"a": np.logspace(-3, 3, 50)})
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(lab.startswith("10") and "$" not in lab for lab in labels)
