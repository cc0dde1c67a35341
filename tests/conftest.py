"""Shared fixtures: small traces and datacenters written by the tests themselves (no ../shared needed).

Also the grouping for parallel runs: ``python -m pytest`` runs the suite on two pytest-xdist workers
(``-n 2 --dist loadgroup`` in ``pyproject.toml``). The tests that run in wall-clock time or start processes of
their own (a live runtime over asyncio or a real nats-server, chaos, Ray, a process pool killed under a deadline)
all go to one group, ``serial``: one worker runs them one after another, never beside each other, while the other
worker runs the deterministic tests. ``-n 0`` runs everything in one process as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

# Test files whose tests must not run beside each other: wall-clock timeouts, live NATS/asyncio deployments,
# subprocesses and process pools, Ray. The deterministic live unit tests (wire formats, seeding, resubmission on
# a fake port) are left out: they can run anywhere.
SERIAL_GROUP = "serial"
_NOT_SERIAL = {"test_live_wire.py", "test_live_seeding.py", "test_live_client_resubmit.py"}
# Single tests of other files that run a live deployment (in-process bus, killed and restarted hosts)
_SERIAL_TESTS = {"test_counters.py::test_a_live_run_reports_only_declared_counters"}


def runs_serially(path: Path, test: str = "") -> bool:
    """Whether the tests of ``path`` (or its test named ``test``, parameters stripped) join the ``serial`` group."""
    name = path.name
    if name in _NOT_SERIAL:
        return False
    if f"{name}::{test}" in _SERIAL_TESTS:
        return True
    return name.startswith("test_live_") or name == "test_sweep_run.py"


# xdist workers start with COLUMNS=80 and LINES=24 in their environment where the controlling run has none; the
# CLI's consoles, made when megha.cli_common is imported, would then wrap tables at 80 columns instead of 160 and
# the output checks would depend on the worker. The controller passes its own values and each worker takes them.
_TERMINAL_VARS = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """Controller: hand each xdist worker this process's terminal size variables (None: not set)."""
    node.workerinput["terminal_env"] = {k: os.environ.get(k) for k in _TERMINAL_VARS}  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    """Worker: the same terminal size variables as the controlling run, before any test module is imported."""
    given = getattr(config, "workerinput", {}).get("terminal_env")
    for key, value in (given or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """The xdist scheduler: load balancing test by test, except the serial files' tests, one work unit.

    A scheduler rather than ``xdist_group`` marks: xdist 3.8 groups marked tests by appending ``@group`` to a
    private node-id attribute that pytest 9.2 no longer reads, so the marks would be ignored without an error.
    Explicit ``@pytest.mark.xdist_group`` marks still group where that works."""
    from xdist.scheduler import LoadGroupScheduling

    class SerialGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path, _, test = nodeid.partition("::")
            if runs_serially(Path(path), test.split("[", 1)[0]):
                return SERIAL_GROUP
            return super()._split_scope(nodeid)

    return SerialGroupScheduling(config, log)


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    """Five small jobs; two share an arrival time."""
    p = tmp_path / "tiny.tr"
    p.write_text("0.0 2 1.5 1.0 2.0\n0.5 1 3.0 3.0\n0.5 3 1.0 1.0 1.0 1.0\n2.0 2 0.75 0.5 1.0\n10.0 1 4.25 4.25\n")
    return p
