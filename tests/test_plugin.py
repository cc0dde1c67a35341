"""Scheduler plug-ins through the ``megha.schedulers`` entry-point group: examples/plugin/ installed for real into a
temporary virtual environment with pip, and the same package seen through a patched importlib.metadata (fast)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import sysconfig
import venv
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugin"


@pytest.fixture
def plugin_registered(monkeypatch):
    """The example plug-in as if installed: its source on sys.path, its entry point in importlib.metadata."""
    from megha.schedulers import registry

    registry.names()  # the built-in families, loaded once per process
    monkeypatch.syspath_prepend(str(PLUGIN / "src"))
    ep = EntryPoint(name="random-fifo", value="megha_random_fifo", group=registry.ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points

    def fake(**kw):
        if kw.get("group") == registry.ENTRY_POINT_GROUP:
            return [ep]
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    saved = dict(registry._REGISTRY)
    monkeypatch.setattr(registry, "_loaded", False)
    sys.modules.pop("megha_random_fifo", None)
    yield registry
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    sys.modules.pop("megha_random_fifo", None)


def test_plugin_appears_and_runs_in_every_front_end(plugin_registered, tmp_path):
    import megha
    from megha.cli import app

    registry = plugin_registered
    assert "random-fifo" in registry.names()
    assert registry.get("random-fifo").plugin == "megha_random_fifo"
    runner = CliRunner()
    res = runner.invoke(app, ["schedulers", "random-fifo"], catch_exceptions=False)
    assert res.exit_code == 0 and "plug-in" in res.output and "head-of-line" in res.output
    res = runner.invoke(
        app,
        [
            "simulate",
            "-s",
            "random-fifo",
            "-t",
            "sample:YH_small",
            "-w",
            "300",
            "-o",
            "scan=2",
            "--out",
            str(tmp_path / "sim"),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["config"]["options"]["scan"] == 2
    res = runner.invoke(
        app,
        [
            "compare",
            "--schedulers",
            "megha,random-fifo",
            "-t",
            "sample:YH_small",
            "-w",
            "300",
            "--out",
            str(tmp_path / "cmp"),
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir() if p.is_dir()) == ["megha", "random-fifo"]
    assert megha.compare(["random-fifo", "ideal"], trace="sample:YH_small", workers=300).shape[0] == 2
    # a sweep on local processes (forked after the registry loaded the plug-in)
    df = megha.sweep(
        {"base": {"trace": "sample:YH_small", "workers": 300}, "grid": {"scheduler": ["random-fifo", "ideal"]}},
        out=tmp_path / "sw",
        workers=2,
        report=False,
    )
    assert list(df["status"]) == ["ok", "ok"]


def test_a_broken_plugin_is_reported_not_fatal(monkeypatch):
    from megha.schedulers import registry

    registry.names()

    ep = EntryPoint(name="broken", value="no_such_module_xyz", group=registry.ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda **kw: [ep] if kw.get("group") == registry.ENTRY_POINT_GROUP else real(**kw),
    )
    monkeypatch.setattr(registry, "_loaded", False)
    with pytest.warns(UserWarning, match="broken"):
        names = registry.names()
    assert "megha" in names and "broken" in registry.PLUGIN_ERRORS


def test_a_plugin_cannot_take_a_builtin_name():
    from megha.schedulers.registry import register

    with pytest.raises(ValueError, match="already registered"):
        register("megha", "impostor")(lambda ctx: None)


@pytest.mark.slow
def test_pip_install_e_examples_plugin(tmp_path):
    """The real path: ``pip install -e examples/plugin`` into a virtual environment that sees this one's packages."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the new environment sees this interpreter's packages (megha, pip) through a .pth file; pip builds the
    # plug-in in an isolated environment (setuptools>=77 from the package index)
    (Path(site) / "_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    p = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "-e", str(PLUGIN)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    p = subprocess.run([str(py), "-m", "megha.cli", "schedulers"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "random-fifo" in p.stdout and "megha-random-fifo 0.1.0" in p.stdout
    out = tmp_path / "run"
    p = subprocess.run(
        [
            str(py),
            "-m",
            "megha.cli",
            "simulate",
            "-s",
            "random-fifo",
            "-t",
            "sample:YH_small",
            "-w",
            "500",
            "--out",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["scheduler"] == "random-fifo"
    # and not in this interpreter: the plug-in is installed only in the temporary environment
    assert subprocess.run([sys.executable, "-c", "import megha_random_fifo"], capture_output=True).returncode != 0
