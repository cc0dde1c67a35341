"""The live deployment's ``[megha]`` settings are the simulator's MeghaOptions, built by the same functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from megha.errors import InputError
from megha.live.config import LiveConfig, LiveMeghaOptions, load_config
from megha.live.deploy import datacenter_of, layout_of
from megha.live.masters import LiveGlobalMaster, LiveLocalMaster
from megha.schedulers.megha import MeghaOptions
from megha.schedulers.megha.wiring import make_gm, make_lm, megha_layout

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "live"
LIVE_OVERRIDES = {"gms", "lms", "heartbeat"}


@pytest.mark.parametrize("name", ["local.toml", "inproc.toml", "auth.toml"])
def test_examples_load(name: str) -> None:
    cfg = load_config(EXAMPLES / name)
    assert isinstance(cfg.megha, MeghaOptions)
    assert (cfg.megha.gms, cfg.megha.lms, cfg.megha.heartbeat) == (2, 4, 1.0)


def test_same_names_defaults_and_descriptions() -> None:
    live, sim = LiveMeghaOptions.model_fields, MeghaOptions.model_fields
    assert set(live) == set(sim)
    for k in set(sim) - LIVE_OVERRIDES:
        assert live[k].description == sim[k].description, k
        assert live[k].default == sim[k].default, k
    # the documented live override: fresher views in a real deployment
    assert LiveMeghaOptions().heartbeat == 1.0 and MeghaOptions().heartbeat == 5.0
    # the same validation: the simulator's bounds hold live
    with pytest.raises(ValueError, match="batch_size"):
        LiveMeghaOptions(batch_size=0)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cfg.toml"
    p.write_text(text)
    return p


def test_unknown_key_named_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"megha\.hearbeat: unknown setting \(did you mean 'heartbeat'\?\)"):
        load_config(_write(tmp_path, "[megha]\nhearbeat = 2.0\n"))
    with pytest.raises(InputError, match=r"broker\.prot: unknown setting"):
        load_config(_write(tmp_path, "[broker]\nprot = 2\n"))


@pytest.mark.parametrize("line", ['profile = "iot23"', 'queue = "fewest-tasks"', 'matching = "scan"'])
def test_simulator_only_settings_refused(tmp_path: Path, line: str) -> None:
    key = line.split(" ")[0]
    with pytest.raises(InputError, match=f"{key}=.*not supported by the live runtime"):
        load_config(_write(tmp_path, f"[megha]\n{line}\n"))


def test_fairness_options_accepted_as_in_the_simulator(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, '[megha]\npolicy = "first"\npreempt_candidates = 4\nreply_always = true\n'))
    assert cfg.megha.preempt_candidates == 4 and cfg.megha.reply_always
    cfg = load_config(_write(tmp_path, '[megha]\nshares = [0.25, 0.75]\nuser_gms = [1, 0]\nusers = "trace"\n'))
    assert cfg.megha.shares == [0.25, 0.75] and cfg.megha.user_gms == [1, 0] and cfg.megha.users == "trace"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("shares = [0.75, 0.5]", "sum to at most 1"),
        ("shares = [0.5, 0.5]\nuser_gms = [0, 2]", "user_gms must give a GM in 0..1"),
        ("shares = [0.5, 0.5]\nuser_gms = [0]", "for each of the 2 users"),
        ("user_gms = [0]", "needs fairness shares"),
        ("shares = [0.5, 0.5]\nhandoff_after = 10.0", "handoff_after needs slot mode, no fairness shares"),
        ("handoff_after = 10.0\n[datacenter]\nresources = true", "handoff_after needs slot mode"),
    ],
)
def test_bad_fairness_settings_refused_when_loaded(tmp_path: Path, line: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        load_config(_write(tmp_path, f"[megha]\n{line}\n"))


def test_sim_options_are_megha_options() -> None:
    m = LiveMeghaOptions(heartbeat=0.5, policy="min-constraints", batch_size=7)
    opts = MeghaOptions(**m.sim_options())
    assert (opts.heartbeat, opts.policy, opts.batch_size) == (0.5, "min-constraints", 7)


def test_json_round_trip() -> None:
    cfg = LiveConfig(megha={"gms": 1, "lms": 2, "heartbeat": 0.5})
    again = LiveConfig.model_validate_json(cfg.model_dump_json())
    assert again.megha == cfg.megha


def test_live_masters_built_by_the_simulators_functions() -> None:
    cfg = LiveConfig(datacenter={"workers": 40}, megha={"gms": 2, "lms": 2, "batch_size": 9, "reply_always": True})
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    same = megha_layout(dc, MeghaOptions(**cfg.megha.sim_options()), n_lms=2, n_gms=2)
    assert (layout.lm_of == same.lm_of).all() and (layout.part_of == same.part_of).all()
    gm = make_gm(1, layout, None, cfg.megha, cls=LiveGlobalMaster, req_base=5)
    assert isinstance(gm, LiveGlobalMaster) and gm.req_seq == 5 and gm.batch_size == 9
    lm = make_lm(0, layout, None, cfg.megha, cls=LiveLocalMaster, host_timeout=2.0)
    assert isinstance(lm, LiveLocalMaster) and lm.heartbeat == 1.0 and lm.reply_always and lm.host_timeout == 2.0


def test_every_megha_option_reaches_the_live_masters_or_is_explained() -> None:
    """The live options are the simulator's: same fields and defaults but the documented live ones, and each option
    either reaches the masters through the simulator's wiring, cuts the layout, is refused live, or is
    simulator-only (a new MeghaOptions field fails here until it is placed)."""
    from megha.live import config as live_config
    from megha.schedulers.megha.wiring import gm_settings, lm_settings

    sim, live = MeghaOptions.model_fields, LiveMeghaOptions.model_fields
    assert set(live) == set(sim)
    differ = {k for k in sim if sim[k].default != live[k].default}
    assert differ == set(live_config.LIVE_DEFAULTS)
    opts = LiveMeghaOptions()
    passed = {*gm_settings(opts), *lm_settings(opts)} - {"fair_period"}  # the GM's fair_period is the heartbeat
    placed = [
        *passed,
        "gms",
        "lms",
        "profile",
        *live_config._LIVE_PAPER_ONLY,
        *live_config._LIVE_UNSET_ONLY,
        *live_config.SIMULATOR_ONLY,
        *live_config.FAIRNESS,
    ]
    assert set(placed) == set(sim), f"MeghaOptions fields not placed for the live runtime: {set(sim) - set(placed)}"
    # the settings reach the live masters as they reach the simulated ones
    cfg = LiveConfig(
        datacenter={"workers": 40},
        megha={"gms": 2, "lms": 2, "policy": "min-constraints", "batch_size": 3, "repartition": False,
               "preempt_candidates": 5, "heartbeat": 0.25, "reply_always": True},
    )  # fmt: skip
    layout = layout_of(cfg)
    gm = make_gm(0, layout, None, cfg.megha, cls=LiveGlobalMaster)
    lm = make_lm(1, layout, None, cfg.megha, cls=LiveLocalMaster)
    assert (gm.policy.value, gm.batch_size, gm.repartition, gm.preempt_candidates, gm.fair_period) == (
        "min-constraints",
        3,
        False,
        5,
        0.25,
    )
    assert (lm.heartbeat, lm.reply_always) == (0.25, True)


def test_broker_threads_set_gomaxprocs_of_the_started_nats_server(monkeypatch):
    from megha.live import supervisor

    cfg = LiveConfig(broker={"threads": 3})
    assert cfg.broker.gomaxprocs() == 3 and supervisor.nats_env(cfg)["GOMAXPROCS"] == "3"
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert LiveConfig().broker.gomaxprocs() == 1  # a small machine shared with the services
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert LiveConfig().broker.gomaxprocs() is None and supervisor.nats_env(LiveConfig()) is None
    with pytest.raises(ValueError):
        LiveConfig(broker={"threads": -1})
