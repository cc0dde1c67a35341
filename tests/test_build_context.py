"""The builder's context gives named build-time streams from the run's seed (one seeding convention, #17)."""

from __future__ import annotations

import numpy as np
import pytest

from megha.config import RunConfig
from megha.runner import load_inputs
from megha.runner.simulate import build
from megha.schedulers import registry
from megha.schedulers.registry import BuildContext
from megha.sim.seeding import named_stream
from tests.tracegen import write_trace


def _context(seed: int | None) -> BuildContext:
    """A context made by hand (only what :meth:`BuildContext.stream` reads matters here)."""
    return BuildContext(
        host=None,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        workload=None,  # type: ignore[arg-type]
        datacenter=None,  # type: ignore[arg-type]
        feasible=np.ones(0, dtype=bool),
        options=None,
        rng=np.random.default_rng(0),
        seed=seed,
    )


def test_a_named_stream_is_the_runs_stream_of_that_name_and_independent_of_others() -> None:
    ctx = _context(7)
    a = ctx.stream("heartbeats").random(4)
    assert np.array_equal(a, named_stream(7, "build", "heartbeats").random(4))
    assert np.array_equal(a, ctx.stream("heartbeats").random(4)), "the same name gives the same stream again"
    assert not np.array_equal(a, ctx.stream("placement").random(4))
    assert not np.array_equal(a, _context(8).stream("heartbeats").random(4))


def test_a_context_without_the_runs_seed_refuses_to_make_a_stream() -> None:
    with pytest.raises(ValueError, match="seed"):
        _context(None).stream("x")


def test_the_simulator_gives_builders_the_runs_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BuildContext] = []
    spec = registry.get("sparrow")
    original = spec.build

    def spy(ctx: BuildContext) -> object:
        seen.append(ctx)
        return original(ctx)

    monkeypatch.setattr(spec, "build", spy)
    cfg = RunConfig(scheduler="sparrow", trace=write_trace([(0.0, [1.0, 2.0])]), workers=4, seed=11)
    w, dc = load_inputs(cfg)
    build(cfg, w, dc)
    assert seen and seen[0].seed == 11
