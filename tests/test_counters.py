"""Declared counters: every scheduler family declares what it counts (namespace, names, meanings) with the registry;
a run reports no undeclared counter, with or without faults; ``summary.json`` groups them by namespace; the readers
of the grouped format also read the flat one written before it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import megha
from megha.config import RunConfig
from megha.metrics import counters as C
from megha.metrics.report import compare_rows, summarize
from megha.runner import simulate
from megha.runner.simulate import fault_kinds_of
from megha.schedulers import registry
from tests.tracegen import write_trace

BUILTIN = [n for n in registry.names() if registry.get(n).plugin is None]
SCHEDULERS_DIR = Path(megha.__file__).parent / "schedulers"


def _jobs(n: int = 30, seed: int = 5) -> list:
    rng = np.random.default_rng(seed)
    return [
        (round(float(a), 3), [round(float(x), 3) for x in rng.uniform(0.2, 6.0, rng.integers(1, 9))])
        for a in np.sort(rng.uniform(0, 20, n))
    ]


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    return write_trace(_jobs(), tmp_path_factory.mktemp("counters") / "w.tr")


RESOURCES = dict(resources=True, constraints=False, capacity={"cpu": 4.0, "mem": 8.0}, demand={"cpu": 2.0, "mem": 1.0})


def _config(name: str, trace: str, **kw) -> RunConfig:
    spec = registry.get(name)
    extra: dict = {}
    if "slot" not in spec.modes:
        extra = dict(
            resources=True, constraints=False, capacity={"cpu": 4.0, "mem": 8.0}, demand={"cpu": 1.0, "mem": 1.0}
        )
    return RunConfig(scheduler=name, trace=trace, workers=24, gms=2, lms=2, seed=3, stall_timeout=3600.0, **extra, **kw)


# --- the declarations ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_scheduler_declares_its_counters(name: str) -> None:
    spec = registry.get(name)
    assert spec.counters is not None, f"{name}: register(..., counters=CounterSet(...)) is missing"
    run, own = spec.counter_sets()
    assert run is C.RUN_COUNTERS and own is spec.counters
    assert re.fullmatch(r"[a-z][a-z0-9_]*", own.namespace)
    for n, text in own.counters.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", n), f"{name}: counter name {n!r}"
        assert text and "\n" not in text and not text.endswith("."), f"{name}: {n}: one line of meaning, no full stop"
    # names without a namespace (summary readers merge a run's groups) stay unambiguous
    assert not set(own.counters) & set(C.RUN_COUNTERS.counters)
    assert not set(own.keys()) & set(C.RUN_COUNTERS.keys())


def test_one_namespace_per_family_and_no_two_families_share_one() -> None:
    by_family: dict[str, set[str]] = {}
    for n in BUILTIN:
        spec = registry.get(n)
        by_family.setdefault(spec.family, set()).add(spec.counters.namespace)
    assert all(len(ns) == 1 for ns in by_family.values()), by_family
    spaces = [next(iter(ns)) for ns in by_family.values()]
    assert len(spaces) == len(set(spaces)) and C.RUN_COUNTERS.namespace not in spaces


_LITERAL = re.compile(r"""(?:counters|stats|counts|\bst|\bts)\[["']([a-z_]+)["']\]""")


@pytest.mark.parametrize("family", sorted({registry.get(n).family for n in BUILTIN}))
def test_every_literal_counter_key_in_a_family_is_declared(family: str) -> None:
    """A source-level check for counters a small run does not reach (fairness, handoffs, failures): every
    ``counters["x"]`` / ``stats["x"]`` / ``counts["x"]`` key written in the family's code is declared (as a name, or
    as the end of one for the families that prefix their components' stats: ``nm_x``, ``arb_x``)."""
    cs = next(registry.get(n).counters for n in BUILTIN if registry.get(n).family == family)
    keys = set()
    for f in (SCHEDULERS_DIR / family).rglob("*.py"):
        keys |= set(_LITERAL.findall(f.read_text()))
    keys -= {"tasks_stranded"} if family != "macrm" else set()  # the runner's (megha.runner.faults), not a family's
    missing = sorted(k for k in keys if not any(n == k or n.endswith(f"_{k}") for n in cs.counters))
    assert not missing, f"{family}: counters written but not declared in its CounterSet: {missing}"


# --- runs report only declared counters ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BUILTIN)
def test_a_run_reports_only_declared_counters(name: str, trace: str) -> None:
    spec = registry.get(name)
    for mode in spec.modes:
        cfg = _config(name, trace)
        if mode == "resource" and "slot" in spec.modes:
            cfg = cfg.model_copy(update=RESOURCES)
        _assert_declared(name, simulate(cfg))


@pytest.mark.parametrize("name", [n for n in BUILTIN if not registry.get(n).unbounded])
def test_a_run_with_faults_reports_only_declared_counters(name: str, trace: str) -> None:
    """One fault of every kind the scheduler offers (its components' crashes and its family's faults)."""
    kinds = fault_kinds_of(name)
    fault = [
        {"at": 2.0 + 1.5 * i, "kind": k, "target": 0.3 if k == "worker" else "random", "down_for": 4.0}
        for i, k in enumerate(kinds)
    ]
    res = simulate(_config(name, trace, faults={"seed": 1, "fault": fault}))
    assert res.unfinished_reason is None, res.unfinished_reason
    _assert_declared(name, res)


def _assert_declared(name: str, res) -> None:
    """Every counter a run of ``name`` reported is declared, or a message that says which and where to declare them."""
    bad = C.undeclared(res.counters, res.counter_sets)
    if bad:
        spec = registry.get(name)
        where = f"plug-in {spec.plugin}" if spec.plugin else f"family {spec.family}"
        how = (
            "declare it with register(..., counters=CounterSet(namespace, {name: meaning}, prefix)) (docs/counters.md)"
            if spec.counters is None
            else f"add it to the CounterSet {spec.counters.namespace!r} given to register(counters=...)"
        )
        raise AssertionError(f"{name} ({where}) reported counter(s) it does not declare: {bad}; {how}")


# --- plug-ins: the example plug-in, and every installed one -----------------------------------------------------------
PLUGIN_SRC = Path(__file__).resolve().parents[1] / "examples" / "plugin" / "src"


@pytest.fixture
def with_plugins(monkeypatch):
    """The registry with the example plug-in (examples/plugin) registered as if installed, beside any installed
    plug-in; restored afterwards."""
    import sys

    registry.names()  # the built-in families and installed plug-ins, loaded once per process
    saved = dict(registry._REGISTRY)
    monkeypatch.syspath_prepend(str(PLUGIN_SRC))
    sys.modules.pop("megha_random_fifo", None)
    if "random-fifo" not in registry._REGISTRY:
        import megha_random_fifo  # noqa: F401 - its import registers random-fifo

        registry._REGISTRY["random-fifo"].plugin = "megha_random_fifo"
    yield [n for n in registry.names() if registry.get(n).plugin is not None]
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    sys.modules.pop("megha_random_fifo", None)


def test_plugins_declare_their_counters_and_a_run_reports_only_those(with_plugins, trace: str) -> None:
    assert "random-fifo" in with_plugins
    for name in with_plugins:
        spec = registry.get(name)
        assert spec.counters is not None, f"{name} (plug-in {spec.plugin}): register(..., counters=CounterSet(...))"
        for mode in spec.modes:
            cfg = _config(name, trace)
            if mode == "resource" and "slot" in spec.modes:
                cfg = cfg.model_copy(update=RESOURCES)
            _assert_declared(name, simulate(cfg))


def test_an_undeclared_counter_of_a_plugin_fails_with_a_clear_message(with_plugins, trace: str) -> None:
    spec = registry.get("random-fifo")
    build = spec.build

    def build_more(ctx):
        dep = build(ctx)
        inner = dep.counters
        dep.counters = lambda: {**inner(), "surprise": 1}
        return dep

    spec.build = build_more
    try:
        res = simulate(_config("random-fifo", trace))
        with pytest.raises(
            AssertionError,
            match=r"random-fifo \(plug-in megha_random_fifo\) reported counter\(s\) it "
            r"does not declare: \['surprise'\]; add it to the CounterSet 'random_fifo'",
        ):
            _assert_declared("random-fifo", res)
        counters, spec.counters = spec.counters, None  # a plug-in that declares nothing
        res = simulate(_config("random-fifo", trace))
        with pytest.raises(AssertionError, match=r"declare it with register\(\.\.\., counters=CounterSet"):
            _assert_declared("random-fifo", res)
    finally:
        spec.build = build
        spec.counters = counters


# --- live runs (megha.live.counters) ----------------------------------------------------------------------------------
LIVE_DIR = Path(megha.__file__).parent / "live"
#: counted by every service's runtime and transport: reported as service_NAME
SERVICE_FILES = {"runtime.py", "transport.py", "metrics.py"}
#: counter keys the live code builds with an f-string, and what they expand to
LIVE_DYNAMIC = {
    "stale_{}_dropped": ["stale_finished_dropped", "stale_killed_dropped"],
    "tasks_resubmitted_{}": ["tasks_resubmitted_gm_restart", "tasks_resubmitted_lost"],
    "service_{}": [],  # the service counters themselves (SERVICE_FILES)
}


def _counter_keys(tree) -> tuple[set[str], set[str]]:
    """String keys of ``...counters[...]`` subscripts in a module (every string in the subscript: a conditional key
    gives both), and the f-string keys as patterns with ``{}``."""
    import ast

    keys: set[str] = set()
    patterns: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript):
            continue
        v = node.value
        if not (
            (isinstance(v, ast.Attribute) and v.attr == "counters") or (isinstance(v, ast.Name) and v.id == "counters")
        ):
            continue
        for sub in ast.walk(node.slice):
            if isinstance(sub, ast.JoinedStr):
                patterns.add("".join(p.value if isinstance(p, ast.Constant) else "{}" for p in sub.values))
            elif (
                isinstance(sub, ast.Constant)
                and isinstance(sub.value, str)
                and not any(isinstance(j, ast.JoinedStr) and sub in j.values for j in ast.walk(node.slice))
            ):
                keys.add(sub.value)
    return keys, patterns


def test_every_counter_the_live_code_writes_is_declared() -> None:
    import ast

    from megha.live.counters import counter_sets

    declared = {cs.key(n) for cs in counter_sets() for n in cs.counters}
    missing, unknown = [], []
    for f in sorted(LIVE_DIR.glob("*.py")):
        keys, patterns = _counter_keys(ast.parse(f.read_text()))
        pre = "service_" if f.name in SERVICE_FILES else ""
        missing += [f"{f.name}: {pre}{k}" for k in sorted(keys) if pre + k not in declared]
        unknown += [f"{f.name}: {p}" for p in sorted(patterns) if p not in LIVE_DYNAMIC]
    missing += [k for ks in LIVE_DYNAMIC.values() for k in ks if k not in declared]
    assert not unknown, f"counter names built at run time, unknown to this test (add them to LIVE_DYNAMIC): {unknown}"
    assert not missing, f"live counters written but not declared in megha.live.counters.LIVE_COUNTERS: {missing}"


def test_live_counter_sets_are_namespaced_and_unambiguous() -> None:
    from megha.live.counters import LIVE_COUNTERS, counter_sets

    sets = counter_sets()
    assert [s.namespace for s in sets] == ["run", "megha", "megha_live"] and sets[-1] is LIVE_COUNTERS
    keys = [s.key(n) for s in sets for n in s.counters]
    assert len(keys) == len(set(keys)), "a live counter declared twice"
    for n, text in LIVE_COUNTERS.counters.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", n) and text and "\n" not in text and not text.endswith(".")


def test_a_live_run_reports_only_declared_counters() -> None:
    """A small live run over the in-process bus with a worker host killed and restarted mid-run (relaunches, lost
    runs, host registrations): every counter its result reports is declared, and summary.json groups them."""
    import asyncio

    from megha.live.client import LiveClient, synthetic_workload, to_run_result, with_constraints
    from megha.live.config import LiveConfig
    from megha.live.deploy import LocalDeployment, datacenter_of, layout_of

    cfg = LiveConfig(
        broker={"kind": "inproc"},
        ha={"failover_timeout": 0.5, "host_timeout": 0.5},
        megha={"heartbeat": 0.5},
    )

    async def run():
        dc = datacenter_of(cfg)
        layout = layout_of(cfg, dc)
        dep = await LocalDeployment(cfg, layout=layout).start()
        cl = LiveClient(cfg, dep.transport("client"), layout)
        await cl.start()
        w = with_constraints(cfg, synthetic_workload(20, 8, 0.6, 1.5, seed=1))
        try:
            job = asyncio.ensure_future(cl.run(w, dc, stall_timeout=30, ready_timeout=30))
            while not cl.started.any():
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.5)
            await dep.kill_host(0)
            await asyncio.sleep(1.2)
            await dep.restart_host(0)
            return to_run_result(await asyncio.wait_for(job, 90), cfg, dc, "synthetic")
        finally:
            await cl.close()
            await dep.close()

    res = asyncio.run(run())
    assert res.unfinished_reason is None, res.unfinished_reason
    bad = C.undeclared(res.counters, res.counter_sets)
    assert not bad, f"a live run reported counters not declared in megha.live.counters: {bad}"
    assert res.counters["host_registrations"] >= 1 and res.counters["hosts_lost"] >= 1
    grouped = summarize(res)["counters"]
    assert set(grouped) <= {"run", "megha", "megha_live"} and "megha_live" in grouped
    assert grouped["megha_live"]["hosts_lost"] == res.counters["hosts_lost"]


# --- summary.json ----------------------------------------------------------------------------------------------------
def test_summary_groups_counters_by_namespace_with_the_same_values(trace: str) -> None:
    res = simulate(_config("sparrow", trace))
    doc = summarize(res)
    c = doc["counters"]
    assert list(c) == ["run", "sparrow"]
    assert c["run"] == {
        "jobs_without_feasible_tasks": res.counters["jobs_without_feasible_tasks"],
        "tasks_infeasible": int((~res.feasible).sum()),
    }
    assert c["sparrow"]["probes"] == res.counters["sparrow_probes"]
    assert list(c["sparrow"]) == sorted(c["sparrow"])
    # every count is there, under its namespace, unchanged
    flat = {k: v for k, v in res.counters.items()}
    back = {**c["run"], **{f"sparrow_{k}": v for k, v in c["sparrow"].items()}}
    assert back == flat
    json.dumps(doc)  # still plain JSON


def test_megha_counters_keep_their_unprefixed_names(trace: str) -> None:
    res = simulate(_config("megha", trace))
    c = summarize(res)["counters"]
    assert set(c) == {"run", "megha"}
    assert c["megha"]["updates_sent"] == res.counters["updates_sent"]
    assert compare_rows([summarize(res)])[0]["inconsistencies"] == res.counters["inconsistencies"]


def test_grouping_of_undeclared_and_undeclaring_results() -> None:
    own = C.CounterSet("toy", {"a": "a thing"})
    sets = (C.RUN_COUNTERS, own)
    flat = {"tasks_infeasible": 2, "toy_a": 5, "toy_b": 1, "other": 7}
    assert C.undeclared(flat, sets) == ["other", "toy_b"]
    assert C.group(flat, sets, "toy-sched") == {"run": {"tasks_infeasible": 2}, "toy": {"a": 5, "b": 1, "other": 7}}
    # a result without a declaration (a live run): what is not run-level goes under the scheduler's name, unchanged
    assert C.group(flat, (C.RUN_COUNTERS,), "megha-live") == {
        "run": {"tasks_infeasible": 2},
        "megha-live": {"other": 7, "toy_a": 5, "toy_b": 1},
    }


def test_readers_take_the_grouped_and_the_flat_format() -> None:
    grouped = {"run": {"tasks_infeasible": 1}, "megha": {"inconsistencies": 4}}
    flat = {"tasks_infeasible": 1, "inconsistencies": 4}
    assert dict(C.items(grouped)) == {"run.tasks_infeasible": 1, "megha.inconsistencies": 4}
    assert dict(C.items(flat)) == flat
    assert C.merged(grouped) == flat == C.merged(flat)


def test_sweep_table_has_a_column_per_namespaced_counter(tmp_path: Path) -> None:
    from megha.sweep.aggregate import run_row
    from megha.sweep.spec import RunPlan

    plan = RunPlan(0, "r", {}, {})
    (tmp_path / "summary.json").write_text(
        json.dumps({"completed": True, "counters": {"run": {"tasks_infeasible": 1}, "megha": {"inconsistencies": 3}}})
    )
    row = run_row(plan, tmp_path, [], [])
    assert row["counter.megha.inconsistencies"] == 3 and row["counter.run.tasks_infeasible"] == 1
    (tmp_path / "summary.json").write_text(json.dumps({"completed": True, "counters": {"inconsistencies": 3}}))
    assert run_row(plan, tmp_path, [], [])["counter.inconsistencies"] == 3  # a summary written before namespaces


# --- the listing -----------------------------------------------------------------------------------------------------
def test_megha_schedulers_name_lists_the_counters_with_their_meaning() -> None:
    from megha.cli import app

    out = CliRunner().invoke(app, ["schedulers", "sparrow"], env={"COLUMNS": "200"}, catch_exceptions=False).output
    assert "counters.sparrow" in out
    for n, text in registry.get("sparrow").counters.counters.items():
        assert n in out and text in out
    out = CliRunner().invoke(app, ["schedulers"], env={"COLUMNS": "200"}, catch_exceptions=False).output
    assert "9 under counters.sparrow in summary.json" in out
