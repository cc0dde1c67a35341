"""The compiled-loop switch shared by Megha's and Sparrow's compiled runs: its settings and its compile-cost rule."""

from __future__ import annotations

import sys
import types

import pytest

from megha.schedulers.common.compiled_switch import ALWAYS, NEVER, CompiledSwitch, kernel_ready

SW = CompiledSwitch("TEST_COMPILED_SWITCH", "fake_compiled_module", "run_lean", cold_min_tasks=100)


def test_mode_reads_the_environment_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SW.env, raising=False)
    assert SW.mode() == ""
    monkeypatch.setenv(SW.env, "0")
    assert SW.mode() == NEVER
    monkeypatch.setenv(SW.env, "1")
    assert SW.mode() == ALWAYS


def test_use_always_large_runs_or_when_compiled_and_asks_readiness_only_when_it_must() -> None:
    asked: list[int] = []

    def ready(answer: bool):
        def f() -> bool:
            asked.append(1)
            return answer

        return f

    assert SW.use(ALWAYS, 5, ready(False)) and not asked  # always, whatever the size
    assert SW.use("", 100, ready(False)) and not asked  # large enough to earn the compile back
    assert SW.use("", 99, ready(True)) and len(asked) == 1  # small, compiled already
    assert not SW.use("", 99, ready(False)) and len(asked) == 2  # small, not compiled: the components
    assert not SW.use("yes", 99, ready(False))  # an unknown setting is automatic


def test_kernel_ready_reads_the_dispatcher_and_is_false_when_in_doubt(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not kernel_ready("no_such_module_for_the_switch", "run_lean")
    compiled = types.SimpleNamespace(run_lean=types.SimpleNamespace(signatures=[("int64",)]))
    monkeypatch.setitem(sys.modules, "fake_compiled_module", compiled)
    assert SW.ready()  # compiled in this process
    no_index = types.SimpleNamespace(_load_index=lambda: {})
    cached = types.SimpleNamespace(_cache_file=types.SimpleNamespace(_load_index=lambda: {("sig",): "x"}))
    compiled.run_lean = types.SimpleNamespace(signatures=[], _cache=cached)
    assert SW.ready()  # in numba's cache for this source
    compiled.run_lean = types.SimpleNamespace(signatures=[], _cache=types.SimpleNamespace(_cache_file=no_index))
    assert not SW.ready()  # nothing compiled, nothing cached
    compiled.run_lean = types.SimpleNamespace(signatures=[], _cache=object())  # no cache file (cache=False)
    assert not SW.ready()


def test_a_real_uncached_dispatcher_is_ready_once_compiled() -> None:
    numba = pytest.importorskip("numba")
    mod = types.ModuleType("fake_numba_switch_module")
    mod.run_lean = numba.njit(lambda x: x + 1)
    sys.modules[mod.__name__] = mod
    try:
        assert not kernel_ready(mod.__name__, "run_lean")
        assert mod.run_lean(1) == 2
        assert kernel_ready(mod.__name__, "run_lean")
    finally:
        del sys.modules[mod.__name__]
