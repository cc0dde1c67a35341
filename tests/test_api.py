"""The Python API (megha.simulate / compare / sweep) end to end, and the runnable examples in examples/api/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import megha
from megha.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


def test_import_is_cheap_and_lazy():
    code = "import sys, megha; print(megha.__version__); print('megha.api' in sys.modules, 'pandas' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == [megha.__version__, "False", "False"]
    assert "simulate" in dir(megha)


def test_simulate_done_when():
    r = megha.simulate(scheduler="megha", trace="sample:YH_small", workers=1000, seed=1)
    assert isinstance(r.jobs, pd.DataFrame) and len(r.jobs) == 10
    assert {"arrival", "ideal", "completion", "delay"} <= set(r.jobs.columns)
    assert len(r.tasks) == r.summary["tasks"] and "allocation" in r.tasks
    assert list(r.utilization.columns) == ["time", "utilization"]
    assert r.summary["workers"] == 1000 and r.summary["seed"] == 1
    assert r.completed and abs(r.summary["delay"]["p50"] - 0.0015) < 1e-9
    assert "1.5 ms" in repr(r)


def test_simulate_defaults_match_the_cli(tmp_path):
    # no workers/cluster: the papers' 10,000-worker datacenter file, as `megha simulate`
    r = megha.simulate("megha", "sample:YH_small")
    assert r.summary["workers"] == 10000 and r.config.cluster == "sample:megha_G5L5S10000"
    # run settings and scheduler options as keyword arguments
    r = megha.simulate("megha", "sample:YH_small", workers=200, gms=2, lms=2, heartbeat=10, network_delay=0.001)
    assert r.summary["config"]["options"]["heartbeat"] == 10.0 and r.config.network_delay == 0.001
    assert r.summary["deployment"]["gms"] == 2


def test_plot_cdf_and_save(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    r = megha.simulate("sparrow", "sample:YH_small", workers=300)
    ax = r.plot_cdf()
    assert ax.get_xscale() == "log" and ax.get_legend() is not None
    r.plot_cdf("allocation", ax=ax, label="alloc")
    out = r.save(tmp_path / "run")
    assert (out / "summary.json").is_file() and (out / "jobs.parquet").is_file()
    with pytest.raises(InputError, match="not empty"):
        r.save(tmp_path / "run")
    r.save(tmp_path / "run", force=True)


def test_compare_done_when():
    results: dict = {}
    df = megha.compare(["megha", "sparrow"], trace="sample:YH_small", workers=1000, results=results)
    assert isinstance(df, pd.DataFrame) and list(df.index) == ["megha", "sparrow"]
    assert {"delay_p50", "delay_p99", "utilization_mean", "completed"} <= set(df.columns)
    assert set(results) == {"megha", "sparrow"} and results["megha"].summary["workers"] == 1000
    assert megha.compare("megha,ideal", trace="sample:YH_small", workers=100).shape[0] == 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: megha.simulate("sparow", "sample:YH_small", workers=10), "did you mean 'sparrow'"),
        (lambda: megha.simulate("megha", "sample:YH_smal", workers=10), "did you mean 'sample:YH_small'"),
        (lambda: megha.simulate("megha", "nope.tr", workers=10), "trace= nope.tr: no such file"),
        (lambda: megha.simulate("megha", "sample:YH_small", workers=10, cluster="x"), "workers= or cluster="),
        (lambda: megha.simulate("megha", "sample:YH_small", workers=0), "workers=: Input should be greater"),
        (lambda: megha.simulate("megha", "sample:YH_small", workers=10, polcy="x"), "did you mean 'policy'"),
        (lambda: megha.compare(["megha", "sparow"], "sample:YH_small", workers=10), "'sparow' \\(did you mean"),
        (lambda: megha.compare(["megha"], "sample:YH_small", workers=10, nope=1), "belong to none"),
        (lambda: megha.compare(["megha", "megha"], "sample:YH_small", workers=10), "given twice"),
    ],
)
def test_errors_speak_api_terms(call, message):
    with pytest.raises(InputError, match=message) as e:
        call()
    assert "--" not in str(e.value)


def test_compare_validates_every_name_before_running(monkeypatch):
    import megha.runner

    ran = []
    monkeypatch.setattr(megha.runner, "simulate", lambda cfg, **kw: ran.append(cfg) or None)
    with pytest.raises(InputError):
        megha.compare(["megha", "sparow"], trace="sample:YH_small", workers=10)
    assert ran == []


def test_sweep_returns_a_dataframe(tmp_path):
    spec = {
        "sweep": {"name": "api-test"},
        "base": {"trace": "sample:YH_small", "workers": 200},
        "grid": {"scheduler": ["megha", "ideal"]},
    }
    df = megha.sweep(spec, out=tmp_path / "sw", workers=1, report=False)
    assert list(df["scheduler"]) == ["megha", "ideal"] and set(df["status"]) == {"ok"}
    assert (tmp_path / "sw" / "results.parquet").is_file()


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples" / "api").glob("*.py")))
def test_examples_run(script, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "api" / script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr


def test_megha_sweep_is_callable_after_the_package_is_imported(tmp_path):
    import megha.sweep.spec  # binds the package as the attribute megha.sweep

    df = megha.sweep(
        {"base": {"trace": "sample:YH_small", "workers": 100, "scheduler": "ideal"}, "grid": {"seed": [0]}},
        out=tmp_path / "s",
        workers=1,
        report=False,
    )
    assert len(df) == 1 and megha.sweep.spec is megha.sweep.spec


def test_sweep_errors_speak_api_terms(tmp_path):
    spec = {"base": {"trace": "sample:YH_small", "workers": 100, "scheduler": "ideal"}}
    megha.sweep(spec, out=tmp_path / "s", workers=1, report=False)
    with pytest.raises(InputError, match="resume=True") as e:
        megha.sweep(spec, out=tmp_path / "s", workers=1, report=False)
    assert "--" not in str(e.value)
    with pytest.raises(InputError, match="did you mean 'sparrow'"):
        megha.sweep({"base": {"scheduler": "sparow", "workers": 10}}, out=tmp_path / "t")


def test_saving_a_run_leaves_the_notebook_backend_alone(tmp_path):
    out = str(tmp_path / "o")
    code = (
        "import matplotlib; matplotlib.use('svg'); import megha; "
        f"r = megha.simulate('megha', 'sample:YH_small', workers=100); r.save({out!r}); "
        "print(matplotlib.get_backend())"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "svg"
