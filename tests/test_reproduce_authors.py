"""The ``authors-results`` reproduction: runs, tables and claims against the authors' result files."""

from __future__ import annotations

from megha.experiments import reference as R
from megha.experiments.registry import ReproContext


def test_every_case_runs_and_every_reported_statistic_gets_a_claim(tmp_path):
    ctx = ReproContext(out=tmp_path, seed=0, log=lambda s: None, extra={"seeds": 2, "max_jobs": 15})
    doc = R.run(ctx)
    assert set(doc["cases"]) == set(R.CASES)
    for c in doc["cases"].values():
        assert [r["seed"] for r in c["per_seed"]] == [0, 1]
        assert all(r["completed"] for r in c["per_seed"])
    claims = R.reference_claims(doc)
    assert len(claims) == sum(len(c["authors"]) for c in R.CASES.values())
    assert all(c.holds is not None for c in claims)
    assert all(c.holds or c.explanation for c in claims)
    assert (tmp_path / "runs.csv").exists() and (tmp_path / "authors_results.md").exists()


def test_quick_skips_the_long_cases_and_reports_them_not_measured():
    doc = {"cases": {}}
    claims = R.reference_claims(doc)
    assert claims and all(c.holds is None for c in claims)


def test_medians_over_seeds():
    rows = [{"p99": 3.0}, {"p99": 1.0}, {"p99": None}, {"p99": 2.0}]
    assert R._median(rows, "p99") == 2.0
    assert R._median([{"p99": None}], "p99") is None
