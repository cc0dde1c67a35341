"""The static shape of a Megha deployment: LMs, partitions, addresses and search orders.

The datacenter is split into ``L`` LM clusters (contiguous worker ranges); each cluster is cut into ``G``
partitions, one per GM. Partition ``(l, g)`` is segment ``l·G + g`` of a :class:`SegmentedIndex`, so a GM
matches a task against the whole datacenter with one AND and then looks at its *internal* partitions
(``(l, g)`` for every LM, round robin over LMs) before the *external* ones (round robin over LMs, then over
the other GMs' partitions). The layout is read-only and shared by every component of a deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from megha.errors import InputError
from megha.model.matching import SegmentedIndex
from megha.model.topology import Datacenter


@dataclass
class MeghaLayout:
    n_lms: int
    n_gms: int
    idx: SegmentedIndex
    worker_masks: np.ndarray
    lm_of: np.ndarray
    part_of: np.ndarray
    lm_lo: np.ndarray
    lm_hi: np.ndarray
    capacity: np.ndarray | None
    int_orders: np.ndarray  # [G, L, L] internal segments for GM g when the round-robin pointer is at LM r
    ext_orders: np.ndarray  # [G, L, L*(G-1)] external segments likewise
    prefix: str = "megha"

    @classmethod
    def build(cls, dc: Datacenter, n_lms: int | None, n_gms: int | None, prefix: str = "megha") -> MeghaLayout:
        """The layout of ``dc`` with ``n_lms`` LMs and ``n_gms`` GMs (None: the datacenter's own), addresses under
        ``prefix``; raises InputError when an LM's workers are not contiguous or a partition gets no worker."""
        lm_of, part_of, L, G = dc.megha_layout(n_lms, n_gms)
        if np.any(np.diff(lm_of) < 0):
            raise InputError("Megha needs each LM's workers to be contiguous in the datacenter's worker order")
        segs = [np.flatnonzero((lm_of == l) & (part_of == g)) for l in range(L) for g in range(G)]  # noqa: E741
        empty = [(s // G, s % G) for s, ws in enumerate(segs) if ws.size == 0]
        if empty:
            raise InputError(f"Megha layout {L} LMs x {G} GMs leaves partition(s) {empty[:3]} without workers")
        idx = SegmentedIndex(segs, dc.worker_masks)
        lm_lo = np.searchsorted(lm_of, np.arange(L), side="left")
        lm_hi = np.searchsorted(lm_of, np.arange(L), side="right")
        int_orders = np.array(
            [[[((r + i) % L) * G + g for i in range(L)] for r in range(L)] for g in range(G)], dtype=np.int64
        ).reshape(G, L, L)
        ext = []
        for g in range(G):
            per_r = []
            for r in range(L):
                row = []
                for i in range(L):
                    lm = (r + i) % L
                    row.extend(lm * G + (g + 1 + k) % G for k in range(G - 1))
                per_r.append(row)
            ext.append(per_r)
        ext_orders = np.array(ext, dtype=np.int64).reshape(G, L, L * (G - 1))
        return cls(
            L, G, idx, dc.worker_masks, lm_of, part_of, lm_lo, lm_hi, dc.capacity, int_orders, ext_orders, prefix
        )

    @property
    def n_workers(self) -> int:
        """How many workers the datacenter has."""
        return int(self.lm_of.size)

    def gm_address(self, g: int) -> str:
        """The address of GM ``g``."""
        return f"{self.prefix}/gm{g}"

    def lm_address(self, lm: int) -> str:
        """The address of LM ``lm``."""
        return f"{self.prefix}/lm{lm}"

    def pool_address(self, lm: int) -> str:
        """The address of LM ``lm``'s worker pool."""
        return f"{self.prefix}/workers{lm}"
