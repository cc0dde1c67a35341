from __future__ import annotations

import json

import numpy as np
import pytest

from megha.errors import InputError
from megha.model.constraints import MACHINE_FRACTIONS
from megha.model.topology import generate, load_cluster
from megha.samples import resolve

from .conftest import DATA


def test_paper_datacenter_has_10000_workers_with_the_design_fractions():
    dc = load_cluster(resolve("sample:megha_G5L5S10000", "cluster"))
    assert dc.n_workers == 10_000
    assert np.allclose(dc.constraint_fractions(), MACHINE_FRACTIONS, atol=0.0006)
    lm, part, L, G = dc.megha_layout(None, None)
    assert (L, G) == (5, 5)
    assert np.bincount(lm * G + part).tolist() == [400] * 25


def test_pigeon_file_holds_the_same_workers():
    m = load_cluster(resolve("sample:megha_G5L5S10000", "cluster"))
    p = load_cluster(resolve("sample:pigeon_D10M100S10000", "cluster"))
    assert np.array_equal(m.worker_masks, p.worker_masks)
    groups, n = p.groups(None)
    assert n == 100 and np.bincount(groups).tolist() == [100] * 100
    assert p.meta["FQW"] == 20 and p.meta["num_distributors"] == 10


def test_bit_order_is_worker_index():
    dc = load_cluster(DATA / "megha_G1L1S9.json")
    # constraint 0 is "0b101000010": workers 0, 2 and 7 have it
    has0 = [(int(m) >> 0) & 1 for m in dc.worker_masks]
    assert has0 == [1, 0, 1, 0, 0, 0, 0, 1, 0]
    assert all((int(m) >> 20) & 1 for m in dc.worker_masks)  # constraint 20: "0b111111111"


def test_even_split_layout():
    dc = generate(1000, np.random.default_rng(0))
    lm, part, L, G = dc.megha_layout(3, 4)
    assert (L, G) == (3, 4)
    assert np.all(np.diff(lm) >= 0)
    sizes = np.bincount(lm * 4 + part)
    assert sizes.sum() == 1000 and sizes.min() >= 83


def test_generated_fractions_and_resources():
    dc = generate(20_000, np.random.default_rng(1))
    assert np.allclose(dc.constraint_fractions(), MACHINE_FRACTIONS, atol=0.015)
    r = dc.with_resources()
    assert r.capacity.shape == (20_000, 2) and r.resource_names == ("cpu", "mem")
    assert r.capacity[0].tolist() == [64.0, 16.0]


def test_profiles_make_clusters_differ():
    profiles = [np.full(21, 0.1), np.full(21, 0.9)]
    dc = generate(4000, np.random.default_rng(2), profiles=profiles, n_clusters=4)
    assert len(dc.meta["profiles"]) == 4


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"LMs": {"1": {"partitions": {"1": ["0b1"] * 20}}}}, "21 constraint bit strings"),
        ({"LMs": {"1": {"partitions": {"1": ["0b12"] * 21}}}}, "bit string"),
        ({"something": 1}, "unknown cluster format"),
    ],
)
def test_bad_cluster_files(tmp_path, doc, match):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=match):
        load_cluster(p)


def test_cluster_file_not_json(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{nope")
    with pytest.raises(InputError, match="line 1"):
        load_cluster(p)


def test_run_config_machine_profiles_reach_the_generator():
    from megha.config import RunConfig
    from megha.runner import load_inputs

    lo, hi = [0.0] * 20 + [1.0], [1.0] * 21
    cfg = RunConfig(scheduler="ideal", trace="sample:YH_small", workers=400, lms=4, seed=3, machine_profiles=[lo, hi])
    _, dc = load_inputs(cfg)
    has0 = (dc.worker_masks & 1).reshape(4, 100)  # constraint 0, per LM cluster of 100 workers
    chosen = dc.meta["profiles"]
    assert len(chosen) == 4
    for c in range(4):  # a cluster drawn from `lo` has no constraint 0, one drawn from `hi` has it everywhere
        assert has0[c].sum() == (0 if chosen[c] == 0 else 100)
    with pytest.raises(ValueError):
        RunConfig(scheduler="ideal", trace="x", machine_fractions=[0.5] * 20)
