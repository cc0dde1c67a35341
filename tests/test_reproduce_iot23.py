"""The IoT 2023 reproductions run end to end on a tiny workload: every configuration they run is one their tables,
Fig. 9 ratios and claims read (a renamed run once broke the full ``iot23-google`` run after its simulations)."""

from __future__ import annotations

from megha.experiments import claims as C
from megha.experiments import iot23
from megha.experiments.registry import ReproContext


def test_iot23_comparison_and_claims_run_on_a_tiny_workload(tmp_path):
    ctx = ReproContext(out=tmp_path, quick=True, seed=0, log=lambda s: None)
    doc = iot23.compare_workloads(ctx, [("tiny", "sample:syn_250", 12, 1000)], "fig6")
    w = doc["workloads"]["tiny"]
    assert {"Megha_rand", "Megha_min", "PigeonC_rand", "PigeonC_min", "PigeonC_iot23"} <= set(w["runs"])
    assert set(w["normalized_utilization"]) == set(iot23.FIG9)
    claims = iot23.iot23_claims(doc, ctx, "Fig. 6")
    assert claims and all(isinstance(c, C.Claim) for c in claims)
    assert all(c.holds is not False or c.explanation for c in claims)
    assert (tmp_path / "fig9_normalized_utilization.png").exists()
