"""Measured processing costs: the least-squares fit, the profiler on a small run, the shipped table and
``processing_model = "measured"`` end to end."""

from __future__ import annotations

import pytest

from megha.config import RunConfig
from megha.errors import InputError
from megha.metrics import processing as P
from megha.metrics.report import summarize
from megha.runner import simulate


def _stats(points):
    s = P.Stats()
    for x, y in points:
        s.add(x, y)
    return s


def test_fit_line_and_clamps():
    assert P.fit(_stats([(1, 12), (2, 14), (5, 20)])) == pytest.approx((10.0, 2.0))
    assert P.fit(_stats([(3, 7), (3, 9)])) == pytest.approx((8.0, 0.0))  # one length: the mean
    assert P.fit(_stats([(1, 9), (2, 5)])) == pytest.approx((7.0, 0.0))  # falling: the mean, no slope
    base, per = P.fit(_stats([(1, 1), (10, 30)]))  # negative intercept: a line through the origin
    assert base == 0.0 and per == pytest.approx(301 / 101)
    assert P.fit(P.Stats()) == (0.0, 0.0)


def test_profiler_times_every_scheduler_component(tiny_trace):
    prof = P.Profiler()
    cfg = RunConfig(scheduler="megha", trace=str(tiny_trace), workers=20, seed=1, processing={"__profile__": 1e-12})
    plain = simulate(RunConfig(scheduler="megha", trace=str(tiny_trace), workers=20, seed=1))
    res = simulate(cfg, instrument=prof.install)
    table = prof.table()
    assert {"gm", "lm"} <= set(table) and not set(table) & P.INFRA_KINDS
    gm = table["gm"]
    assert gm["messages"] >= 5 and gm["base"] >= 0 and gm["per_item"] >= 0 and gm["mean_cpu_s"] > 0
    assert "JobArrival" in gm["by_type"]
    assert sum(v.get("timers", 0) for v in table.values()) > 0
    # the profiler only observes: same schedule as without it
    assert (res.recorder.start == plain.recorder.start).all()


TABLE = {
    "measured_at": "2024-01-01",
    "method": "test",
    "sizes": {
        "10000": {"s": {"gm": {"base": 1e-5, "per_item": 1e-6}, "lm": {"base": 2e-5, "per_item": 0.0}}},
        "100000": {"s": {"gm": {"base": 1e-4, "per_item": 1e-5}}},
    },
}


def test_measured_model_interpolates_between_sizes():
    base, per, info = P.measured_model("s", 55000, TABLE)
    assert base["gm"] == pytest.approx(5.5e-5) and per["gm"] == pytest.approx(5.5e-6)
    assert base["lm"] == pytest.approx(2e-5)  # measured at one size only: that size's
    assert info["from_sizes"] == [10000, 100000]
    assert P.measured_model("s", 1000, TABLE)[0]["gm"] == pytest.approx(1e-5)  # below: the nearest size
    assert P.measured_model("s", 10**6, TABLE)[0]["gm"] == pytest.approx(1e-4)  # above: the nearest size
    with pytest.raises(KeyError):
        P.measured_model("nope", 1000, TABLE)


def test_shipped_table_covers_the_default_compare():
    t = P.load_table()
    assert {"10000", "100000"} <= set(t["sizes"]) and t["method"] and t["machine"]
    from megha.schedulers import registry

    for name in registry.names():
        if registry.get(name).in_compare:
            assert name in t["sizes"]["10000"] and name in t["sizes"]["100000"], (
                f"{name} is in the default compare but has no measured costs: "
                f"python benchmarks/measure_processing.py --only {name} --merge"
            )


def test_run_with_measured_costs_says_so(tiny_trace):
    cfg = RunConfig(scheduler="megha", trace=str(tiny_trace), workers=20, seed=1, processing_model="measured")
    doc = summarize(simulate(cfg))
    pm = doc["processing_model"]
    assert pm["name"] == "measured" and "measured" in pm["description"]
    assert pm["base"]["gm"] + pm["per_item"]["gm"] > 0 and pm["from_sizes"] == [10000]
    assert doc["allocation_time"]["processing"]["max"] > 0
    custom = summarize(simulate(cfg.model_copy(update={"processing_model": "none", "processing": {"gm": 1e-3}})))
    assert custom["processing_model"]["name"] == "custom"


def test_unmeasured_scheduler_is_a_clear_error(tiny_trace, monkeypatch):
    monkeypatch.setattr(P, "load_table", lambda: {"sizes": {}})
    cfg = RunConfig(scheduler="megha", trace=str(tiny_trace), workers=20, processing_model="measured")
    with pytest.raises(InputError, match="no measured costs for 'megha'"):
        simulate(cfg)
