"""The sweep report: one static HTML file with embedded plots; it renders in headless Chromium without errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from megha.sweep import run_sweep
from megha.sweep.report import build_report

SWEEP = {
    "sweep": {"name": "report"},
    "base": {"trace": "sample:GOOG_subtrace", "max_jobs": 6, "gms": 2, "lms": 2},
    "grid": {"workers": [40, 120], "seed": [0, 1]},
    "runs": [{"scheduler": "megha"}, {"scheduler": "sparrow"}],
}


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "s"
    run_sweep(SWEEP, out, workers=2, progress=False, log=lambda s: None)
    return out


def test_report_is_self_contained(sweep_dir: Path) -> None:
    html = (sweep_dir / "report.html").read_text()
    imgs = re.findall(r'<img class="plot" id="([^"]+)" data-kind="([^"]+)"[^>]*src="data:image/png;base64,', html)
    kinds = {k for _, k in imgs}
    assert {"pct-alloc", "pct-delay", "cdf-alloc", "cdf-delay", "util-time", "util-mean"} <= kinds
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched from anywhere
    assert "Summary per group" in html and "All runs" in html
    assert html.count("<tr>") >= 8 + 1  # every run in the results table


def test_report_rebuilds_and_handles_an_empty_sweep(sweep_dir: Path, tmp_path: Path) -> None:
    before = (sweep_dir / "report.html").stat().st_size
    build_report(sweep_dir)
    assert abs((sweep_dir / "report.html").stat().st_size - before) < 0.05 * before
    # a sweep whose runs all failed still gets a report (no plots, the failures listed)
    doc = {"base": {"trace": str(tmp_path / "nope.tr"), "workers": 10}, "grid": {"seed": [0, 1]}}
    run_sweep(doc, tmp_path / "bad", workers=1, progress=False, log=lambda s: None)
    html = (tmp_path / "bad" / "report.html").read_text()
    assert "Failed runs" in html and '<img class="plot"' not in html


def test_report_renders_in_headless_chromium(sweep_dir: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    url = (sweep_dir / "report.html").resolve().as_uri()
    flags = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*flags, "--virtual-time-budget=5000", "--dump-dom", url], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    root = re.search(r"<html[^>]*>", dom.stdout).group(0)
    n = int(re.search(r'data-plots="(\d+)"', root).group(1))
    loaded = int(re.search(r'data-plots-loaded="(\d+)"', root).group(1))
    errors = int(re.search(r'data-errors="(\d+)"', root).group(1))
    assert n >= 6 and loaded == n and errors == 0, root
    shot = tmp_path / "report.png"
    r = subprocess.run(
        [*flags, "--window-size=1280,2400", f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    import matplotlib.image as mpimg

    img = mpimg.imread(str(shot))
    assert img.shape[0] >= 2000 and img.shape[1] >= 1200
    # the page is not blank: plots put colored pixels on it
    rgb = img[..., :3]
    colored = (rgb.max(axis=2) - rgb.min(axis=2)) > 0.2
    assert colored.mean() > 0.005
    assert np.std(rgb) > 0.05
