"""Datacenter topology: workers, their machine constraints and resources, and layout hints.

A :class:`Datacenter` is a columnar description of ``N`` workers in a fixed order:

* ``worker_masks`` — machine-constraint bit mask of each worker (see :mod:`megha.model.constraints`);
* ``capacity`` — ``(N, R)`` resource capacities in *resource mode*, or ``None`` in *slot mode*, where a
  worker runs one task at a time (as every reference simulator does);
* layout hints from the file it came from: ``lm_of``/``partition_of`` (the Megha GM/LM/partition layout)
  and ``group_of`` (PigeonC masters). A scheduler that needs another layout splits the worker order
  evenly instead (:meth:`Datacenter.megha_layout`, :meth:`Datacenter.groups`).

Import the papers' cluster files with :func:`load_cluster` and generate any size with :func:`generate`.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from megha.errors import InputError
from megha.model.constraints import (
    MACHINE_FRACTIONS,
    MASK_DTYPE,
    NUM_CONSTRAINTS,
    synthesize_machine_constraints,
)

DEFAULT_CAPACITY = {"cpu": 64.0, "mem": 16.0}
#: Megha's layout when neither the datacenter file nor the user gives one: the papers' 10,000-worker datacenter
#: (``megha_config_G5L5S10000``) has 5 GMs and 5 LMs of 2,000 workers; 20,000 workers get 5 GMs x 10 LMs.
DEFAULT_GMS = 5
WORKERS_PER_LM = 2000
"""Resource-mode default worker: 64 CPU cores and 16 GB of memory (Megha paper §V-B)."""


@dataclass(frozen=True)
class Datacenter:
    """Columnar description of a datacenter's workers."""

    worker_masks: np.ndarray
    capacity: np.ndarray | None = None
    resource_names: tuple[str, ...] = ()
    lm_of: np.ndarray | None = None
    partition_of: np.ndarray | None = None
    group_of: np.ndarray | None = None
    name: str = "datacenter"
    source: str = "generated"
    meta: dict = field(default_factory=dict)

    @property
    def n_workers(self) -> int:
        """The number of workers."""
        return int(self.worker_masks.size)

    @property
    def resource_mode(self) -> bool:
        """Whether the workers have capacity vectors (resource mode) rather than one slot each."""
        return self.capacity is not None

    def with_resources(self, capacity: dict[str, float] | None = None) -> Datacenter:
        """A copy in resource mode where every worker has the given capacities (default 64 cores, 16 GB)."""
        cap = dict(DEFAULT_CAPACITY if capacity is None else capacity)
        names = tuple(cap)
        arr = np.tile(np.array([cap[k] for k in names], dtype=np.float64), (self.n_workers, 1))
        return replace(self, capacity=arr, resource_names=names)

    def megha_layout(self, n_lms: int | None, n_gms: int | None) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Worker → (LM, partition) mapping for ``n_lms`` LMs with ``n_gms`` partitions each.

        Uses the file's layout when it matches (or when the counts are not given), else splits the worker
        order evenly: contiguous LM clusters, each cut into ``n_gms`` contiguous partitions. Counts not given
        follow the papers' 10,000-worker layout (5 GMs x 5 LMs: 2,000 workers per LM, 400 per partition):
        :data:`DEFAULT_GMS` GMs and one LM per :data:`WORKERS_PER_LM` workers.
        """
        if self.lm_of is not None and self.partition_of is not None:
            file_lms = int(self.lm_of.max()) + 1
            file_gms = int(self.partition_of.max()) + 1
            if (n_lms in (None, file_lms)) and (n_gms in (None, file_gms)):
                return self.lm_of, self.partition_of, file_lms, file_gms
        if n_gms is None:
            n_gms = max(1, min(DEFAULT_GMS, self.n_workers // (n_lms or 1)))
        if n_lms is None:
            n_lms = max(1, min(round(self.n_workers / WORKERS_PER_LM), self.n_workers // n_gms))
        if n_lms * n_gms > self.n_workers:
            raise InputError(
                f"{n_lms} LMs x {n_gms} GMs need at least {n_lms * n_gms} workers, the datacenter has {self.n_workers}"
            )
        i = np.arange(self.n_workers, dtype=np.int64)
        lm = (i * n_lms) // self.n_workers
        starts = np.searchsorted(lm, np.arange(n_lms))
        sizes = np.bincount(lm, minlength=n_lms)
        part = ((i - starts[lm]) * n_gms) // sizes[lm]
        return lm.astype(np.int32), part.astype(np.int32), n_lms, n_gms

    def groups(self, n_groups: int | None) -> tuple[np.ndarray, int]:
        """Worker → group (e.g. PigeonC master) mapping; the file's groups when they match."""
        if self.group_of is not None and n_groups in (None, int(self.group_of.max()) + 1):
            return self.group_of, int(self.group_of.max()) + 1
        n = n_groups or 1
        if n > self.n_workers:
            raise InputError(f"{n} groups need at least {n} workers, the datacenter has {self.n_workers}")
        i = np.arange(self.n_workers, dtype=np.int64)
        return ((i * n) // self.n_workers).astype(np.int32), n

    def constraint_fractions(self) -> np.ndarray:
        """Fraction of workers that have each constraint."""
        bits = (self.worker_masks[:, None] >> np.arange(NUM_CONSTRAINTS, dtype=MASK_DTYPE)) & 1
        return bits.mean(axis=0)


def generate(
    n_workers: int,
    rng: np.random.Generator,
    fractions: np.ndarray | None = None,
    profiles: list[np.ndarray] | None = None,
    n_clusters: int = 1,
    constrained: bool = True,
) -> Datacenter:
    """Generate ``n_workers`` workers with machine constraints drawn per constraint.

    Each constraint ``k`` is present with probability ``fractions[k]`` (default: the papers' 10,000-worker
    fractions, DESIGN §3.2). With ``profiles``, the workers are cut into ``n_clusters`` contiguous clusters
    and each cluster draws its probabilities from one profile chosen at random, so clusters differ (as the
    Megha paper does with Sharma et al.'s clusters A, B and C). ``constrained=False`` gives every worker
    every constraint.
    """
    if n_workers < 1:
        raise InputError(f"a datacenter needs at least one worker, got {n_workers}")
    if not constrained:
        masks = np.full(n_workers, (1 << NUM_CONSTRAINTS) - 1, dtype=MASK_DTYPE)
        return Datacenter(worker_masks=masks, name=f"dc{n_workers}-unconstrained")
    if profiles:
        i = np.arange(n_workers, dtype=np.int64)
        cluster = (i * n_clusters) // n_workers
        chosen = rng.integers(0, len(profiles), size=n_clusters)
        masks = np.empty(n_workers, dtype=MASK_DTYPE)
        for c in range(n_clusters):
            sel = cluster == c
            masks[sel] = synthesize_machine_constraints(int(sel.sum()), rng, profiles[int(chosen[c])])
        return Datacenter(worker_masks=masks, name=f"dc{n_workers}", meta={"profiles": chosen.tolist()})
    masks = synthesize_machine_constraints(n_workers, rng, fractions if fractions is not None else MACHINE_FRACTIONS)
    return Datacenter(worker_masks=masks, name=f"dc{n_workers}")


def _bitstring_column(path: str, where: str, s: object, expected_len: int | None) -> np.ndarray:
    if not isinstance(s, str) or not s.startswith("0b") or set(s[2:]) - {"0", "1"}:
        raise InputError(f"{path}: {where}: expected a bit string like '0b0101', got {str(s)[:40]!r}")
    bits = np.frombuffer(s[2:].encode("ascii"), dtype=np.uint8) == ord("1")
    if expected_len is not None and bits.size != expected_len:
        raise InputError(f"{path}: {where}: bit string has {bits.size} bits, expected {expected_len}")
    return bits


def _masks_from_vectors(path: str, where: str, vectors: object) -> np.ndarray:
    """21 bit strings (bit w of string k = worker w has constraint k) → per-worker masks."""
    if not isinstance(vectors, list) or len(vectors) != NUM_CONSTRAINTS:
        n = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
        raise InputError(f"{path}: {where}: expected a list of {NUM_CONSTRAINTS} constraint bit strings, got {n}")
    cols = []
    size = None
    for k, s in enumerate(vectors):
        col = _bitstring_column(path, f"{where}, constraint {k}", s, size)
        size = col.size
        cols.append(col)
    bits = np.stack(cols, axis=1)
    weights = (np.uint32(1) << np.arange(NUM_CONSTRAINTS, dtype=np.uint32)).astype(MASK_DTYPE)
    return (bits.astype(MASK_DTYPE) * weights).sum(axis=1, dtype=MASK_DTYPE)


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d, key=lambda k: int(k))
    except (TypeError, ValueError):
        return sorted(d)


def load_cluster(path: str | Path) -> Datacenter:
    """Import a cluster file: the Megha layout (``{"LMs": ...}``) or the PigeonC layout (``{"workers": ...}``).

    ``.json`` and ``.json.gz`` are accepted. Errors name the file and the offending entry.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise InputError(f"{p}: cannot read cluster file: {e.strerror or e}") from e
    if p.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:  # EOFError: a truncated file
            raise InputError(f"{p}: not a complete gzip file ({e}); was the download cut short?") from None
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: line {e.lineno}: not valid JSON: {e.msg}") from e
    if not isinstance(doc, dict):
        raise InputError(f"{p}: expected a JSON object at the top level")
    name = p.name.split(".")[0]
    if "LMs" in doc:
        lms = doc["LMs"]
        if not isinstance(lms, dict) or not lms:
            raise InputError(f"{p}: 'LMs' must be a non-empty object")
        masks, lm_of, part_of = [], [], []
        n_parts = None
        for li, lk in enumerate(_sorted_keys(lms)):
            parts = lms[lk].get("partitions") if isinstance(lms[lk], dict) else None
            if not isinstance(parts, dict) or not parts:
                raise InputError(f"{p}: LMs.{lk}: missing 'partitions'")
            if n_parts is None:
                n_parts = len(parts)
            elif len(parts) != n_parts:
                raise InputError(f"{p}: LMs.{lk}: has {len(parts)} partitions, LM 1 has {n_parts}")
            for pi, pk in enumerate(_sorted_keys(parts)):
                m = _masks_from_vectors(str(p), f"LMs.{lk}.partitions.{pk}", parts[pk])
                masks.append(m)
                lm_of.append(np.full(m.size, li, dtype=np.int32))
                part_of.append(np.full(m.size, pi, dtype=np.int32))
        return Datacenter(
            worker_masks=np.concatenate(masks),
            lm_of=np.concatenate(lm_of),
            partition_of=np.concatenate(part_of),
            name=name,
            source=str(p),
        )
    if "workers" in doc:
        groups = doc["workers"]
        if not isinstance(groups, dict) or not groups:
            raise InputError(f"{p}: 'workers' must be a non-empty object")
        masks, group_of = [], []
        for gi, gk in enumerate(_sorted_keys(groups)):
            m = _masks_from_vectors(str(p), f"workers.{gk}", groups[gk])
            masks.append(m)
            group_of.append(np.full(m.size, gi, dtype=np.int32))
        meta = {k: doc[k] for k in ("num_distributors", "FQW", "reserve", "cutoff") if k in doc}
        dc = Datacenter(
            worker_masks=np.concatenate(masks),
            group_of=np.concatenate(group_of),
            name=name,
            source=str(p),
            meta=meta,
        )
        if "num_workers" in doc and int(doc["num_workers"]) != dc.n_workers:
            raise InputError(f"{p}: num_workers says {doc['num_workers']}, the bit strings hold {dc.n_workers}")
        return dc
    raise InputError(f"{p}: unknown cluster format: expected a top-level 'LMs' (Megha) or 'workers' (PigeonC) key")
