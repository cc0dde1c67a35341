"""Multi-resource packing (paper §VIII): Tetris-style alignment score and the max reduction.

Two ways to schedule jobs that request several resources (CPU, memory, …) on servers with a capacity per
resource:

* **max reduction** (what the paper does on the Google trace): a job's size is
  ``max_r demand_r / capacity_r`` and every single-resource policy applies unchanged (:func:`max_reduce`).
  It never over-commits a resource, at the price of fragmentation.
* **alignment score** (the paper's suggested extension, after Grandl et al.'s Tetris): the Best-Fit
  family keeps vectors. Sizes are per-resource units (each resource normalized to the server's capacity);
  a job fits a server iff it fits in every resource; the Best-Fit score of job ``d`` on a server with
  occupied vector ``u`` is the inner product ``d · (u + d)`` — the server's occupancy after placement seen
  from the job. For one resource it orders servers by occupancy (least residual first = Best-Fit) and jobs
  by size (largest first = BF-S), so the policies reduce to their single-resource definitions.

The vector structures scan with numpy (O(n) vectorized per query over n servers or queued jobs) instead of
the sorted indexes of the single-resource case, which have no multi-dimensional counterpart.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from megha.errors import InputError
from megha.schedulers.packing.structures import UNIT, Accept, quantize_array


def max_reduce(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Per-job size ``max_r demand[:, r] / capacity[r]`` (the paper's single-resource reduction)."""
    d = np.atleast_2d(np.asarray(demand, dtype=np.float64))
    c = np.asarray(capacity, dtype=np.float64)
    if c.ndim != 1 or c.size != d.shape[1]:
        raise InputError(f"max reduction: capacity has {c.size} resources, demands have {d.shape[1]}")
    if (c <= 0).any():
        raise InputError("max reduction: every capacity must be > 0")
    return (d / c[None, :]).max(axis=1)


def vector_units(demand: np.ndarray, capacity: np.ndarray, what: str = "demand") -> np.ndarray:
    """Per-resource sizes in units (each resource normalized to the server capacity, rounded up)."""
    d = np.atleast_2d(np.asarray(demand, dtype=np.float64))
    c = np.asarray(capacity, dtype=np.float64)
    return quantize_array(d / c[None, :], what)


class VectorServers:
    """``n`` servers with ``R`` resources of ``UNIT`` each."""

    def __init__(self, n: int, R: int) -> None:
        if n < 1 or R < 1:
            raise InputError(f"vector servers need n >= 1 and R >= 1 (got {n}, {R})")
        self.n = n
        self.R = R
        self.used = np.zeros((n, R), dtype=np.int64)
        self.njobs = [0] * n

    def room(self, s: int) -> np.ndarray:
        """Free units of server ``s``, per resource."""
        return UNIT - self.used[s]

    def fits(self, s: int, x: np.ndarray) -> bool:
        """Whether a job of size ``x`` fits server ``s`` in every resource."""
        return bool((self.used[s] + np.asarray(x) <= UNIT).all())

    def add(self, s: int, x: np.ndarray) -> None:
        """Place a job of size ``x`` on server ``s``."""
        self.used[s] += np.asarray(x, dtype=np.int64)
        self.njobs[s] += 1

    def sub(self, s: int, x: np.ndarray) -> None:
        """Remove a job of size ``x`` from server ``s``."""
        self.used[s] -= np.asarray(x, dtype=np.int64)
        self.njobs[s] -= 1

    def max_room(self) -> np.ndarray:
        """Component-wise maximum free capacity (a job that exceeds it fits nowhere)."""
        return UNIT - self.used.min(axis=0)

    def _feasible(self, x: np.ndarray) -> np.ndarray:
        return (self.used <= UNIT - np.asarray(x, dtype=np.int64)).all(axis=1)

    def best_fit(self, x: np.ndarray, accept: Accept = None) -> int:
        """Feasible server with the highest alignment ``x · used`` (lowest id on ties), or -1."""
        ok = self._feasible(x)
        cand = np.flatnonzero(ok)
        if cand.size == 0:
            return -1
        xf = np.asarray(x, dtype=np.float64) / UNIT
        score = (self.used[cand] / UNIT) @ xf
        if accept is None:
            return int(cand[int(np.argmax(score))])
        for i in np.lexsort((cand, -score)):
            s = int(cand[i])
            if accept(s):
                return s
        return -1

    def first_fit(self, x: np.ndarray, lo: int = 0, accept: Accept = None) -> int:
        """The lowest-index server at or after ``lo`` where ``x`` fits (and ``accept`` allows), or -1."""
        ok = self._feasible(x)
        ok[:lo] = False
        for s in np.flatnonzero(ok):
            if accept is None or accept(int(s)):
                return int(s)
        return -1

    def first_room(self, x: np.ndarray, lo: int = 0) -> int:
        """The lowest-index server at or after ``lo`` where ``x`` fits, or -1."""
        return self.first_fit(x, lo)


class VectorJobs:
    """Queued jobs with vector sizes, in arrival order (rows), with numpy scans.

    Serves as both the size queue (``best_for``/``min_size``) and the arrival order (``first_fitting``)
    of the Best-Fit family.
    """

    def __init__(self, R: int, capacity: int = 256) -> None:
        self.R = R
        self.D = np.zeros((capacity, R), dtype=np.int64)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.alive = np.zeros(capacity, dtype=bool)
        self.top = 0
        self.count = 0
        self.pos: dict[int, int] = {}

    def __len__(self) -> int:
        return self.count

    def add(self, job: int, x: np.ndarray) -> None:
        """Queue job ``job`` of size ``x`` behind the others."""
        if self.top >= self.ids.size:
            self._rebuild()
        p = self.top
        self.D[p] = x
        self.ids[p] = job
        self.alive[p] = True
        self.pos[job] = p
        self.top += 1
        self.count += 1

    append = add

    def remove(self, job: int, x: np.ndarray | None = None) -> None:
        """Take job ``job`` out of the queue (``x`` unused: the signature of the other queues)."""
        p = self.pos.pop(job)
        self.alive[p] = False
        self.count -= 1

    def position(self, job: int) -> int:
        """The queue position (row) of job ``job``."""
        return self.pos[job]

    def job_at(self, p: int) -> int:
        """The job at queue position ``p``."""
        return int(self.ids[p])

    def min_size(self) -> np.ndarray:
        """The smallest queued size per resource (the queue must not be empty)."""
        a = self.alive[: self.top]
        return self.D[: self.top][a].min(axis=0)

    def _fitting(self, room: np.ndarray, lo: int = 0) -> np.ndarray:
        top = self.top
        ok = self.alive[lo:top] & (self.D[lo:top] <= np.asarray(room)).all(axis=1)
        return np.flatnonzero(ok) + lo

    def first_fitting(self, room: np.ndarray, lo: int = 0) -> int:
        """The first queue position at or after ``lo`` whose job fits ``room``, or -1."""
        idx = self._fitting(room, lo)
        return int(idx[0]) if idx.size else -1

    def best_for(self, room: np.ndarray, used: np.ndarray | None = None, accept: Accept = None) -> int:
        """The fitting job with the highest alignment ``d · (used + d)`` (oldest on ties), or -1."""
        idx = self._fitting(room)
        if idx.size == 0:
            return -1
        D = self.D[idx] / UNIT
        u = np.zeros(self.R) if used is None else np.asarray(used, dtype=np.float64) / UNIT
        score = D @ u + (D * D).sum(axis=1)
        if accept is None:
            return int(self.ids[idx[int(np.argmax(score))]])
        for i in np.lexsort((idx, -score)):
            j = int(self.ids[idx[i]])
            if accept(j):
                return j
        return -1

    def _rebuild(self) -> None:
        keep = np.flatnonzero(self.alive[: self.top])
        cap = max(256, 2 * keep.size + 1)
        D = np.zeros((cap, self.R), dtype=np.int64)
        ids = np.full(cap, -1, dtype=np.int64)
        alive = np.zeros(cap, dtype=bool)
        D[: keep.size] = self.D[keep]
        ids[: keep.size] = self.ids[keep]
        alive[: keep.size] = True
        self.D, self.ids, self.alive = D, ids, alive
        self.top = keep.size
        self.pos = {int(j): p for p, j in enumerate(ids[: keep.size].tolist())}


def vector_structures(
    n_servers: int, R: int
) -> tuple[VectorServers, Callable[[], VectorJobs], Callable[[], VectorJobs]]:
    """(servers, queue factory, arrival-order factory) for the vector Best-Fit family."""
    return VectorServers(n_servers, R), (lambda: VectorJobs(R)), (lambda: VectorJobs(R))
