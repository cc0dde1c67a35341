"""The claims machinery: builders, tables, the registry's papers, and ``megha reproduce --check`` end to end."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from megha.experiments import claims as C
from megha.experiments import registry as R


def test_builders_hold_fail_and_unmeasured():
    ok = C.at_least("a", "Fig. 1", "x at least 10x", 12.0, 10.0, paper="≥ 10×", why_not="because")
    assert ok.holds is True and ok.explanation == "" and ok.measured == "12×" and ok.tolerance == "≥ 10×"
    bad = C.at_least("b", "Fig. 1", "x at least 10x", 4.3, 10.0, paper="≥ 10×", why_not="PigeonC is milder")
    assert bad.holds is False and bad.explanation == "PigeonC is milder"
    none = C.at_least("c", "Fig. 1", "x", None, 10.0, paper="≥ 10×", why_not="w")
    assert none.holds is None and none.explanation == C.NOT_MEASURED and none.measured == C.MISSING
    nan = C.at_most("d", "Fig. 1", "x", float("nan"), 1.0, paper="≤ 1")
    assert nan.holds is None
    unexplained = C.at_most("e", "Fig. 1", "x", 2.0, 1.0, paper="≤ 1")
    assert unexplained.holds is False and "no explanation" in unexplained.explanation


def test_within_factor_and_pct():
    assert C.within_factor("a", "F", "c", 0.003, 0.0015, 2.0).holds is True
    assert C.within_factor("a", "F", "c", 0.0031, 0.0015, 2.0).holds is False
    assert C.within_factor("a", "F", "c", 0.00075, 0.0015, 2.0).holds is True
    c = C.within_pct("a", "F", "c", 0.0135, 0.01219, 25.0, why_not="w")
    assert c.holds is True and c.tolerance == "within 25 % of the paper"
    assert C.within_pct("a", "F", "c", 0.0072, 0.01219, 25.0, why_not="w").holds is False


def test_is_true_and_dict_round_trip():
    c = C.is_true("a", "Fig. 11", "rises", False, paper="rises", measured_text="3 > 5 > 1", why_not="heavy load")
    d = c.to_dict()
    assert d["holds"] is False and d["measured"] == "3 > 5 > 1" and d["explanation"] == "heavy load"
    assert C.Claim.from_dict(d) == c
    assert C.ratio(4, 2) == 2 and C.ratio(1, 0) is None and C.ratio(None, 2) is None


def _results():
    claims = [
        C.at_least("p99", "Fig. 8", "Megha's p99 10x lower", 13.9, 10.0, paper="≥ 10×").to_dict(),
        C.at_least("p50", "Fig. 8", "PigeonC | median", 1.0, 10.0, paper="≥ 10×", why_not="milder").to_dict(),
        C.at_least("p90", "Fig. 8", "other", 1.0, 10.0, paper="≥ 10×", why_not="milder").to_dict(),
        C.at_least("u", "Fig. 9", "util", None, 1.0, paper="< 1").to_dict(),
    ]
    return {"exp-a": {"quick": True, "claims": claims}, "exp-b": {"error": "RuntimeError: boom", "quick": True}}


def test_markdown_table_keeps_failures_with_shared_notes():
    md = C.markdown_table(_results())
    assert "| `exp-a` (quick) | Fig. 8 | Megha's p99 10x lower | ≥ 10× | 13.9× | ≥ 10× | holds |" in md
    assert "PigeonC \\| median" in md  # pipes escaped
    assert md.count("does not hold (1)") == 2  # identical explanations share one note
    assert "1. milder" in md and "RuntimeError: boom" in md
    assert "4 claims: 1 hold, 2 do not hold, 1 not measured." in md


def test_render_table_and_tally():
    table, notes = C.render_table(_results())
    assert table.row_count == 5
    assert notes[0] == "milder" and "boom" in notes[-1]
    assert C.tally(_results()["exp-a"]["claims"]) == {"claims": 4, "hold": 1, "do_not_hold": 2, "not_measured": 1}


def test_splice_replaces_only_the_marked_section():
    text = f"# title\n\nbefore\n\n{C.BEGIN}\n\nold table\n\n{C.END}\n\nafter\n"
    out = C.splice(text, "| new |\n")
    assert "old table" not in out and "| new |" in out and out.startswith("# title") and out.endswith("after\n")
    assert C.splice(out, "| newer |\n").count(C.END) == 1
    with pytest.raises(ValueError):
        C.splice("no markers", "x")


def test_every_experiment_names_its_paper_figures_and_claims():
    exps = R.all_experiments()
    assert len(exps) >= 18
    for e in exps:
        assert e.paper in R.PAPERS, e.id
        assert e.figures, e.id
        assert e.claims is not None, e.id
        assert "seed 0" not in e.paper_label and "seed 0" not in e.title, e.id


def _fake(ctx):
    (ctx.out / "x.txt").write_text("x")
    return {"value": 3.0 if ctx.quick else 30.0}


def _fake_claims(doc, ctx):
    return [
        C.at_least("v", "Fig. 1", "value at least 10", doc["value"], 10.0, paper="≥ 10", fmt=C.fmt_number,
                   why_not="the quick run is small"),
    ]  # fmt: skip


def _boom(ctx):
    raise RuntimeError("boom")


@pytest.fixture
def fake_experiments(monkeypatch):
    R._load_all()
    monkeypatch.setitem(
        R._EXPERIMENTS, "zz-fake", R.Experiment("zz-fake", "t", "iot23", _fake, "", "Fig. 1", _fake_claims)
    )
    monkeypatch.setitem(R._EXPERIMENTS, "zz-boom", R.Experiment("zz-boom", "t", "iot23", _boom, "", "Fig. 2", None))


def test_reproduce_check_end_to_end(fake_experiments, tmp_path):
    from megha.cli import app

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{C.BEGIN}\n\n{C.END}\n\nend\n")
    r = CliRunner().invoke(
        app,
        [
            "reproduce",
            "--check",
            "--quick",
            "--only",
            "zz-fake",
            "--out",
            str(tmp_path / "o"),
            "--markdown",
            str(readme),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "does not hold" in r.output and "the quick run is small" in r.output
    doc = json.loads((tmp_path / "o" / "zz-fake" / "summary.json").read_text())
    assert doc["claims"][0]["holds"] is False and doc["claims_tally"]["do_not_hold"] == 1
    assert doc["paper_title"].startswith("Constraint-Aware") and doc["figures"] == "Fig. 1"
    text = readme.read_text()
    assert "| `zz-fake` (quick) | Fig. 1 | value at least 10 | ≥ 10 | 3 | ≥ 10 | does not hold (1) |" in text
    assert text.startswith("intro") and text.endswith("end\n")
    # --reuse re-checks the stored document without running again
    (tmp_path / "o" / "zz-fake" / "x.txt").unlink()
    r = CliRunner().invoke(
        app, ["reproduce", "--check", "--quick", "--reuse", "--only", "zz-fake", "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "o" / "zz-fake" / "x.txt").exists()
    # a full run's claims hold; an experiment that fails makes the exit status non-zero, the others still run
    r = CliRunner().invoke(app, ["reproduce", "--check", "--only", "zz-boom,zz-fake", "--out", str(tmp_path / "f")])
    assert r.exit_code == 1, r.output
    assert "boom" in r.output
    claims = json.loads((tmp_path / "f" / "claims.json").read_text())
    assert claims["zz-fake"]["claims"][0]["holds"] is True and "error" in claims["zz-boom"]
    # with --quick, --reuse takes a full run found in --out as it is (its rows are not marked quick) ...
    r = CliRunner().invoke(
        app,
        [
            "reproduce",
            "--check",
            "--quick",
            "--reuse",
            "--only",
            "zz-fake",
            "--out",
            str(tmp_path / "f"),
            "--markdown",
            "-",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "| `zz-fake` | Fig. 1 |" in r.output
    # ... but a quick run never stands in for a full one
    r = CliRunner().invoke(app, ["reproduce", "--check", "--reuse", "--only", "zz-fake", "--out", str(tmp_path / "o")])
    assert r.exit_code == 1 and "quick run" in r.output


def test_reproduce_list_shows_titles_and_citations():
    from megha.cli import app

    r = CliRunner().invoke(app, ["reproduce", "--list"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "Constraint-Aware Federated Scheduling" in r.output and "doi:10.3390/iot4040023" in r.output
    assert "(seed 00" not in r.output


def test_reproduce_check_quick_on_a_real_experiment(tmp_path):
    """``megha reproduce --check --quick`` end to end on a fast reproduction (Sirius priorities, ~15 s)."""
    from megha.cli import app

    out = tmp_path / "chk"
    r = CliRunner().invoke(
        app, ["reproduce", "--check", "--quick", "--only", "sirius-priority", "--out", str(out), "--markdown", "-"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "claims.json").read_text())["sirius-priority"]
    assert doc["quick"] is True and doc["figures"] and doc["citation"]
    claims = doc["claims"]
    assert len(claims) >= 5 and doc["claims_tally"]["claims"] == len(claims)
    for c in claims:
        assert c["claim"] and c["paper"] and c["measured"] and c["tolerance"]
        assert c["holds"] in (True, False, None)
        if c["holds"] is not True:
            assert c["explanation"], c
    assert "| `sirius-priority` (quick) |" in r.output
    assert (out / "sirius-priority" / "priority.png").exists()


def test_a_broken_claims_function_is_reported_not_fatal(tmp_path, monkeypatch):
    R._load_all()

    def broken(doc, ctx):
        return [doc["no such key"]]

    exp = R.Experiment("zz-broken", "t", "iot23", _fake, "", "Fig. 3", broken)
    monkeypatch.setitem(R._EXPERIMENTS, "zz-broken", exp)
    doc = R.run_experiment("zz-broken", R.ReproContext(out=tmp_path / "b", quick=True, log=lambda s: None))
    assert doc["claims"][0]["id"] == "claims-error" and "KeyError" in doc["claims"][0]["explanation"]
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["value"] == 3.0
