"""Fault schedules: parsing with clear errors, expansion into concrete faults, determinism."""

from __future__ import annotations

import math

import pytest

from megha.errors import InputError
from megha.model.faults import load_schedule, parse_schedule

DOC = {
    "seed": 3,
    "fault": [
        {"at": 10, "kind": "worker", "target": 0.1, "down_for": 60},
        {"at": 20, "kind": "gm", "target": 1},
        {"at": 5, "kind": "worker", "target": [3, 4]},
    ],
    "random": [{"kind": "worker", "mtbf": 1000.0, "down_for": 30, "until": 500}],
}


def test_expand_orders_faults_and_draws_fractions_and_random_processes():
    s = parse_schedule(DOC, "f.toml")
    ev = s.expand(100.0, 1100.0, {"worker": 100, "gm": 2})
    assert [e.at for e in ev] == sorted(e.at for e in ev)
    fixed = [e for e in ev if e.source.startswith("fault")]
    assert [(e.at, e.kind) for e in fixed] == [(105.0, "worker"), (110.0, "worker"), (120.0, "gm")]
    assert fixed[0].targets == (3, 4) and fixed[0].down_for == math.inf
    assert len(fixed[1].targets) == 10 and fixed[1].down_for == 60
    rnd = [e for e in ev if e.source.startswith("random")]
    # 100 workers, mtbf 1000 s, 500 s: about 50 faults
    assert 25 <= len(rnd) <= 80 and all(100 < e.at <= 600 for e in rnd)
    assert ev == parse_schedule(DOC, "f.toml").expand(100.0, 1100.0, {"worker": 100, "gm": 2})
    other = parse_schedule({**DOC, "seed": 4}).expand(100.0, 1100.0, {"worker": 100, "gm": 2})
    assert other != ev


@pytest.mark.parametrize(
    ("doc", "msg"),
    [
        ({"fault": [{"kind": "gm"}]}, "fault 1: missing field 'at'"),
        ({"fault": [{"at": -1, "kind": "gm"}]}, "field 'at': must be >= 0"),
        ({"fault": [{"at": 1, "kind": "gm", "when": 3}]}, "unknown field(s) ['when']"),
        ({"fault": [{"at": 1}]}, "fault 1: field 'kind'"),
        ({"random": [{"kind": "worker", "mtbf": 0}]}, "random 1: field 'mtbf': must be > 0"),
        ({"faults": []}, "unknown key(s) ['faults']"),
        ({}, "no [[fault]] and no [[random]]"),
        ({"seed": "x", "fault": [{"at": 1, "kind": "gm"}]}, "field 'seed'"),
    ],
)
def test_bad_schedules_name_the_entry_and_field(doc, msg):
    with pytest.raises(InputError) as e:
        parse_schedule(doc, "f.toml")
    assert msg in str(e.value) and "f.toml" in str(e.value)


def test_targets_out_of_range_and_unknown_kinds_are_clear_errors():
    s = parse_schedule({"fault": [{"at": 1, "kind": "lm", "target": 9}]}, "f.toml")
    with pytest.raises(InputError, match=r"id 9 is out of range \(0..4\)"):
        s.expand(0, 10, {"lm": 5})
    with pytest.raises(InputError, match="has no 'lm' to fail"):
        s.expand(0, 10, {"worker": 5})
    with pytest.raises(InputError, match="scheduler 'sparrow' has no component of kind 'lm'; its fault kinds: worker"):
        s.check_kinds("sparrow", {"worker": "its tasks are re-run"})


def test_load_from_toml(tmp_path):
    p = tmp_path / "f.toml"
    p.write_text('seed = 1\n[[fault]]\nat = 3\nkind = "worker"\ntarget = 0.5\ndown_for = 2\n')
    ev = load_schedule(p).expand(0, 10, {"worker": 4})
    assert len(ev) == 1 and len(ev[0].targets) == 2
    p.write_text("[[fault]\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_schedule(p)
    with pytest.raises(InputError, match="no such file"):
        load_schedule(tmp_path / "missing.toml")
