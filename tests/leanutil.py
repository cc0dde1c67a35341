"""Shared by the tests of the compiled event loops (Megha's, Sparrow's, Pigeon's): run a configuration through the
compiled loop and through the components and check that both give the same results, the switch's cold-start rule,
and a ledger whose workers all run a task (to drive a loop into the over-commit error).

A new compiled loop's test module starts with ``_both = both_ways("<FAMILY>_LEAN")`` and compares with
:func:`assert_same_run`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from megha.config import RunConfig
from megha.metrics.fingerprint import fingerprint
from megha.metrics.result import RunResult
from megha.runner import simulate
from megha.schedulers.common.compiled_switch import CompiledSwitch
from megha.schedulers.common.ledger import WorkerLedger

#: the task every worker of a busy ledger runs (:func:`assert_busy_ledger_error`)
BUSY_TASK = 10**9


def run_both(monkeypatch: pytest.MonkeyPatch, cfg: RunConfig, switch: str) -> tuple[RunResult, RunResult]:
    """``cfg`` with the compiled loop forced on (``switch=1``), then with the components (``switch=0``)."""
    monkeypatch.setenv(switch, "1")
    fast = simulate(cfg)
    monkeypatch.setenv(switch, "0")
    slow = simulate(cfg)
    return fast, slow


def both_ways(switch: str) -> Callable[[pytest.MonkeyPatch, RunConfig], tuple[RunResult, RunResult]]:
    """:func:`run_both` for the compiled loop switched by the environment variable ``switch``."""

    def both(monkeypatch: pytest.MonkeyPatch, cfg: RunConfig) -> tuple[RunResult, RunResult]:
        return run_both(monkeypatch, cfg, switch)

    return both


def assert_same_run(fast: RunResult, slow: RunResult, compiled: bool = True) -> None:
    """The two runs agree: per-task fingerprint, events, end time, message counts and counters; the first took the
    compiled loop (or not, with ``compiled=False``), the second did not."""
    assert fast.extras.get("compiled_run", False) is compiled
    assert not slow.extras.get("compiled_run", False)
    assert fingerprint(fast) == fingerprint(slow)
    assert fast.events == slow.events
    assert fast.end_time == slow.end_time
    assert fast.message_counts == slow.message_counts
    assert fast.counters == slow.counters
    assert fast.unfinished_reason is None and slow.unfinished_reason is None


def assert_cold_threshold(monkeypatch: pytest.MonkeyPatch, switch: CompiledSwitch, small: RunConfig) -> None:
    """``switch``'s rule on a ``small`` run (fewer tasks than the cold threshold): set to 1, the run takes the
    compiled loop (and compiles it); unset, it takes it because it is compiled in this process; unset and not
    compiled, the components run and the run does not even say it tried."""
    monkeypatch.setenv(switch.env, "1")
    assert simulate(small).extras.get("compiled_run") is True
    assert switch.ready()
    monkeypatch.delenv(switch.env)
    assert simulate(small).extras.get("compiled_run") is True  # compiled in this process
    monkeypatch.setattr(CompiledSwitch, "ready", lambda self: False)
    assert "compiled_run" not in simulate(small).extras  # small and not compiled: the components


def assert_busy_ledger_error(
    monkeypatch: pytest.MonkeyPatch, runner: ModuleType, busy: bool, small: RunConfig, want: str
) -> None:
    """A compiled loop that starts a task on a worker that runs one already raises the ledger's over-commit error
    from the compiled run (matching the regular expression ``want``), not a fall-back to the components: the
    runner module ``runner`` (a ``_lean``, its loop forced on) is given ledgers whose workers all run task
    :data:`BUSY_TASK` from the start (``busy``), or plain ones through the same subclass (``busy=False``: the
    hand-made ledger itself changes nothing, the run completes compiled)."""
    from megha.errors import SimulationError

    class Busy(WorkerLedger):
        def __init__(self, *args: object, **kw: object) -> None:
            super().__init__(*args, **kw)
            if busy:
                self.task[:] = BUSY_TASK

    monkeypatch.setattr(runner, "WorkerLedger", Busy)
    monkeypatch.setenv(runner.SWITCH.env, "1")
    if not busy:
        assert simulate(small).extras.get("compiled_run") is True
        return
    with pytest.raises(SimulationError, match=want):
        simulate(small)
