"""A trace's machine list as a datacenter description.

:func:`write_cluster_json` writes the Megha layout JSON that :func:`megha.model.topology.load_cluster` reads
(``{"LMs": {"1": {"partitions": {"1": [21 constraint bit strings], …}}, …}}``), so ``--cluster FILE`` works with
it today. The traces give capacities, not the 21 Sharma et al. machine constraints, so each machine's
constraints are synthesized (with the papers' per-constraint fractions and a seed), or every machine gets every
constraint (``seed=None``). The machines' capacities and source ids are kept in the same file under the key
``"megha_machines"`` (ignored by ``load_cluster``)::

    "megha_machines": {"format": 1, "source": "...", "resources": ["cpu", "mem"],
                       "ids": ["5", "6", ...], "capacity": {"cpu": [0.5, ...], "mem": [0.2493, ...]}}

:func:`load_machines` reads such a file into a :class:`~megha.model.topology.Datacenter` *with* those
per-machine capacities (resource mode). Capacities are in the trace's own units, the same units as the task
requests the converter writes (Google: normalized to the largest machine; Alibaba: CPU cores and memory as a
fraction of the normalized maximum).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from megha.errors import InputError
from megha.model.constraints import MACHINE_FRACTIONS, MASK_DTYPE, NUM_CONSTRAINTS, synthesize_machine_constraints

if TYPE_CHECKING:
    from megha.model.topology import Datacenter

FORMAT = 1


@dataclass
class MachineTable:
    """Machines of a trace: source ids and capacities ``[N, R]``."""

    ids: list[str]
    capacity: np.ndarray
    resource_names: tuple[str, ...] = ("cpu", "mem")
    source: str = ""
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """The number of machines."""
        return len(self.ids)


def machine_masks(n: int, seed: int | None) -> np.ndarray:
    """Synthesized machine constraints (papers' fractions) or, with ``seed=None``, every constraint."""
    if seed is None:
        return np.full(n, (1 << NUM_CONSTRAINTS) - 1, dtype=MASK_DTYPE)
    return synthesize_machine_constraints(n, np.random.default_rng(seed), MACHINE_FRACTIONS)


def _bits(masks: np.ndarray, k: int) -> str:
    b = (((masks >> np.uint32(k)) & np.uint32(1)).astype(np.uint8) + ord("0")).tobytes().decode("ascii")
    return "0b" + b


def write_cluster_json(
    table: MachineTable, path: str | Path, lms: int = 1, gms: int = 1, constraints_seed: int | None = 0
) -> Path:
    """Write the machines as a Megha cluster file (``.json`` or ``.json.gz``) with capacities kept."""
    p = Path(path)
    n = table.n
    if n == 0:
        raise InputError("the trace has no machines with a known capacity: no cluster file written")
    if lms < 1 or gms < 1 or lms * gms > n:
        raise InputError(f"{lms} LMs x {gms} partitions need at least {lms * gms} machines, the trace has {n}")
    masks = machine_masks(n, constraints_seed)
    doc_lms: dict[str, dict] = {}
    i = np.arange(n, dtype=np.int64)
    lm_of = (i * lms) // n
    for li in range(lms):
        ws = np.flatnonzero(lm_of == li)
        parts = {}
        m = ws.size
        part_of = (np.arange(m) * gms) // m
        for pi in range(gms):
            sel = masks[ws[part_of == pi]]
            parts[str(pi + 1)] = [_bits(sel, k) for k in range(NUM_CONSTRAINTS)]
        doc_lms[str(li + 1)] = {"partitions": parts}
    doc = {
        "LMs": doc_lms,
        "megha_machines": {
            "format": FORMAT,
            "source": table.source,
            "resources": list(table.resource_names),
            "constraints_seed": constraints_seed,
            "ids": [str(x) for x in table.ids],
            "capacity": {name: [float(x) for x in table.capacity[:, r]] for r, name in enumerate(table.resource_names)},
        },
    }
    data = json.dumps(doc, separators=(",", ":")).encode()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(gzip.compress(data, mtime=0) if p.suffix == ".gz" else data)
    return p


def load_machines(path: str | Path) -> Datacenter:
    """A cluster file written by :func:`write_cluster_json` as a resource-mode Datacenter (per-machine capacity).

    A plain Megha/PigeonC cluster file (no ``megha_machines`` key) is returned as ``load_cluster`` reads it.
    """
    from megha.model.topology import load_cluster

    p = Path(path)
    dc = load_cluster(p)  # checks the file (readable, valid JSON, layout) and names it in any error
    raw = p.read_bytes()
    if p.suffix == ".gz":
        raw = gzip.decompress(raw)
    if b'"megha_machines"' not in raw:  # a plain cluster file: no second parse
        return dc
    doc = json.loads(raw)
    mm = doc.get("megha_machines")
    if mm is None:
        return dc
    if not isinstance(mm, dict) or mm.get("format") != FORMAT:
        raise InputError(f"{p}: 'megha_machines' has an unknown format (expected format {FORMAT})")
    names = tuple(mm.get("resources") or ())
    try:
        cap = np.stack([np.asarray(mm["capacity"][r], dtype=np.float64) for r in names], axis=1)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{p}: 'megha_machines.capacity' is malformed: {e}") from None
    if cap.shape[0] != dc.n_workers:
        raise InputError(f"{p}: 'megha_machines' lists {cap.shape[0]} machines, the layout has {dc.n_workers}")
    return replace(dc, capacity=cap, resource_names=names, meta={**dc.meta, "machine_ids": mm.get("ids")})
