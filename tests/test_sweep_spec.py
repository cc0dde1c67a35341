"""Sweep files: grid and list expansion, dotted options, validation errors, stable run ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from megha.errors import InputError
from megha.sweep.spec import load, param_names, parse

BASE = {"trace": "sample:YH_small", "workers": 20, "gms": 2, "lms": 2}


def test_grid_times_runs() -> None:
    spec = parse(
        {
            "base": BASE,
            "grid": {"seed": [0, 1, 2], "workers": [20, 40]},
            "runs": [{"scheduler": "megha", "options": {"heartbeat": 10}}, {"scheduler": "sparrow"}],
        }
    )
    plans = spec.expand()
    assert len(plans) == 12
    assert [p.index for p in plans] == list(range(12))
    assert param_names(plans) == ["scheduler", "options.heartbeat", "seed", "workers"]
    assert plans[0].config["options"] == {"heartbeat": 10}
    assert plans[-1].config["scheduler"] == "sparrow" and plans[-1].config["options"] == {}
    assert plans[-1].params["options.heartbeat"] is None
    assert len({p.id for p in plans}) == 12
    assert all(p.config["trace"] == "sample:YH_small" for p in plans)


def test_dotted_and_nested_grid_keys_and_literal_lists() -> None:
    spec = parse(
        {
            "base": {**BASE, "scheduler": "megha", "options": {"shares": [0.5, 0.5]}},
            "grid": {"options": {"heartbeat": [5, 10]}, "capacity.cpu": [32, 64]},
        }
    )
    plans = spec.expand()
    assert len(plans) == 4
    assert plans[0].config["options"] == {"shares": [0.5, 0.5], "heartbeat": 5}
    assert plans[1].config["capacity"] == {"cpu": 64, "mem": 16.0}
    assert plans[0].params == {"options.heartbeat": 5, "capacity.cpu": 32}


def test_list_valued_option_varied_in_grid() -> None:
    spec = parse({"base": {**BASE, "scheduler": "megha"}, "grid": {"options.shares": [[0.5, 0.5], [0.2, 0.8]]}})
    plans = spec.expand()
    assert [p.config["options"]["shares"] for p in plans] == [[0.5, 0.5], [0.2, 0.8]]


def test_defaults_like_megha_simulate() -> None:
    plans = parse({"grid": {"seed": [0, 1]}}).expand()
    assert plans[0].config["scheduler"] == "megha"
    assert plans[0].config["trace"] == "sample:GOOG_subtrace"
    assert plans[0].config["cluster"] == "sample:megha_G5L5S10000"


def test_ids_are_stable_across_reordering() -> None:
    a = parse({"base": BASE, "grid": {"seed": [0, 1], "workers": [20, 40]}}).expand()
    b = parse({"base": BASE, "grid": {"workers": [40, 20], "seed": [1, 0]}}).expand()
    assert {p.id for p in a} == {p.id for p in b}
    assert all(p.id.startswith("seed-") for p in b)  # parameters in a fixed (sorted) order


def test_aliases_and_toml(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(
        '[sweep]\nname = "x"\n[base]\ntrace = "sample:YH_small"\nworkers = 20\ntruncate = true\n'
        '[grid]\nseed = [0, 1]\n"options.heartbeat" = 3\n'
    )
    spec = load(f)
    assert spec.name == "x"
    plans = spec.expand()
    assert plans[0].config["truncate_durations"] is True
    assert plans[0].config["options"]["heartbeat"] == 3
    assert param_names(plans) == ["seed"]  # a one-value grid entry is not a varying parameter


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"base": {"trace": "sample:YH_small", "wrokers": 3}}, r"unknown run setting 'wrokers'"),
        ({"grid": {"workers": [0, 5]}}, r"run 0: invalid configuration: workers"),
        ({"base": {"scheduler": "sparrow"}, "grid": {"options.heartbeat": [1, 2]}}, r"scheduler 'sparrow': bad option"),
        ({"base": {"scheduler": "nope"}}, r"unknown scheduler 'nope'"),
        ({"grid": {"seed": [1, 1]}}, r"run 1: same configuration as run 0"),
        ({"grid": {"seed": []}}, r"empty list"),
        ({"grids": {}}, r"unknown section"),
        ({"sweep": {"nmae": "x"}}, r"unknown key"),
        ({"base": {"scheduler": "pigeonc", "resources": True, "workers": 5}}, r"does not support resource mode"),
    ],
)
def test_errors_name_the_run_and_field(doc, match) -> None:
    with pytest.raises(InputError, match=match):
        parse(doc).expand()


def test_bad_toml(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("[grid\nseed = 1\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load(f)


def test_example_sweep_files_expand() -> None:
    root = Path(__file__).resolve().parents[1] / "examples" / "sweeps"
    files = sorted(root.glob("*.toml"))
    assert len(files) >= 3
    counts = {f.stem: len(load(f).expand()) for f in files}
    assert counts["schedulers"] == 36 and counts["megha_options"] == 16 and counts["megha_size"] == 3


def test_sweep_names_are_plain_names():
    from megha.errors import InputError

    for bad in ("../evil", "a/b", "/abs", ".hidden", "x/../../y"):
        with pytest.raises(InputError, match="not a plain name"):
            parse({"sweep": {"name": bad}, "base": {"scheduler": "ideal"}})
    assert parse({"sweep": {"name": "megha-size_2.v1"}, "base": {"scheduler": "ideal"}}).name == "megha-size_2.v1"


def test_an_empty_sweep_is_an_error(tmp_path):
    from megha.errors import InputError
    from megha.sweep.spec import load

    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing here\n[sweep]\nname = 'e'\n")
    with pytest.raises(InputError, match="defines no run"):
        load(empty)
