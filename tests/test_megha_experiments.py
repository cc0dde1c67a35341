"""Megha reproductions' parameters (no simulation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from megha.errors import InputError
from megha.experiments.megha20 import BASE_COST, PER_TASK_PER_WORKER, _central_params, _processing, central_claims
from megha.experiments.registry import ReproContext


def ctx(**extra) -> ReproContext:
    return ReproContext(out=Path("."), extra=extra)


def test_central_cost_parameters():
    assert _central_params(ctx()) == (["model", "none"], BASE_COST, PER_TASK_PER_WORKER)
    assert _central_params(ctx(costs="none", base_cost=0.001, per_task_per_worker=0)) == (["none"], 0.001, 0.0)
    for bad in ({"costs": "some"}, {"base_cost": "x"}, {"per_task_per_worker": -1}):
        with pytest.raises(InputError):
            _central_params(ctx(**bad))


def test_processing_model_scales_with_each_component_share_of_the_state():
    base, per = _processing(10000, 5, 10, 1e-4, 1e-8)
    assert base == {"gm": 1e-4, "lm": 1e-4, "rm": 1e-4}
    assert per["gm"] == pytest.approx(2e-5) and per["lm"] == pytest.approx(1e-5) and per["rm"] == pytest.approx(1e-4)
    assert _processing(10000, 5, 10, 0.0, 0.0) == ({}, {})


def test_central_claims_note_the_runs_without_costs():
    checks = {"central_over_decentral_allocation_p50": 3.0, "central_over_decentral_allocation_p99": 1.5}
    doc = {
        "costs": "model",
        "processing": {"base_per_message": 1e-4, "per_task_per_worker_of_state": 1e-8},
        "sizes": {"10000": {"checks": checks}},
        "without_costs": {"sizes": {"10000": {"checks": {"central_over_decentral_allocation_p50": 1.01}}}},
    }
    claims = central_claims(doc)
    assert [c.holds for c in claims] == [True, False]
    assert "Without processing costs: 1.01" in claims[0].explanation
    assert "processing-cost model" in claims[1].explanation
