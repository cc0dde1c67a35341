"""Shared by the tests of the compiled simulation loops (Megha's and Sparrow's): run a configuration through the
compiled loop and through the components, and check that both give the same results."""

from __future__ import annotations

import pytest

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.metrics.result import RunResult
from megha.runner import simulate


def run_both(monkeypatch: pytest.MonkeyPatch, cfg: RunConfig, switch: str) -> tuple[RunResult, RunResult]:
    """``cfg`` with the compiled loop forced on (``switch=1``), then with the components (``switch=0``)."""
    monkeypatch.setenv(switch, "1")
    fast = simulate(cfg)
    monkeypatch.setenv(switch, "0")
    slow = simulate(cfg)
    return fast, slow


def assert_same_run(fast: RunResult, slow: RunResult, compiled: bool = True) -> None:
    """The two runs agree: per-task fingerprint, events, end time, message counts and counters."""
    assert fast.extras.get("compiled_run", False) is compiled
    assert not slow.extras.get("compiled_run", False)
    assert fingerprint(fast) == fingerprint(slow)
    assert fast.events == slow.events
    assert fast.end_time == slow.end_time
    assert fast.message_counts == slow.message_counts
    assert fast.counters == slow.counters
    assert fast.unfinished_reason is None and slow.unfinished_reason is None
