"""Index structures of the packing schedulers: servers by residual capacity, queues by size or arrival.

Sizes are integers in units of ``1 / UNIT`` of a server's capacity (a server holds ``UNIT``), so capacity
checks are exact: a job of size ``x`` fits a server iff ``used + x <= UNIT``. :func:`quantize` maps a real
size in (0, 1] to units, rounding *up* (a placement the scheduler accepts never exceeds the real
capacity; a slack of 1e-3 units absorbs float noise so that 0.4 + 0.6 still fills a server exactly).

Every query costs O(log n) (n servers or queued jobs) — per-slot work of a policy is proportional to
what changed, not to the size of the cluster or of the queue:

* :class:`LineServers` — single-resource servers, residual capacity indexed by a sorted list
  (best fit = tightest server that fits, by bisection) and/or a max-segment tree by server index
  (first fit = lowest index that fits; "next server at or after i with room for x").
* :class:`SizeQueue` — queued jobs sorted by size (largest job that fits a given room, smallest job).
* :class:`ArrivalOrder` — queued jobs in arrival order over a max-segment tree of negated sizes
  (first job in arrival order that fits a given room).
* :class:`MaxTree` — the segment tree used by the two above.

Every query takes an optional ``accept`` predicate (server id or job id → bool) used by the simulator path
when tasks carry placement constraints; candidates that are not accepted are skipped (the query then scans,
which costs more but stays correct). With :class:`Constraints`, the single-resource structures switch to compiled
scans over flat arrays (:mod:`~megha.schedulers.packing._kernels`), O(servers) or O(queue) per query but without
Python-level loops. Vector (multi-resource) counterparts are in
:mod:`megha.schedulers.packing.multires`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from types import ModuleType

import numpy as np
from sortedcontainers import SortedList

from megha.errors import InputError

UNIT = 1_000_000_000
"""Capacity of one server in size units."""

_SLACK = 1e-3  # units of float noise forgiven when rounding a size up
_SERVER_BITS = 24  # server ids < 2**24 in packed sort keys
_SERVER_MASK = (1 << _SERVER_BITS) - 1
_JOB_BITS = 40  # job ids < 2**40 in packed sort keys
_JOB_MASK = (1 << _JOB_BITS) - 1
NEG = -(1 << 62)
_BLOCK_BITS = 6
_BLOCK = 1 << _BLOCK_BITS  # servers per block of the compiled best-fit scan's room bounds

Accept = Callable[[int], bool] | None


_K = None


def _kernels() -> ModuleType:
    """The compiled constrained scans (imported on first use: numba is slow to import, so the CLI stays fast)."""
    global _K
    if _K is None:
        from megha.schedulers.packing import _kernels as k

        _K = k
    return _K


def quantize(x: float) -> int:
    """Size in units of a real size in (0, 1], rounded up (at least one unit)."""
    u = math.ceil(x * UNIT - _SLACK)
    return 1 if u < 1 else u


def quantize_array(x: np.ndarray, what: str = "size") -> np.ndarray:
    """Vectorized :func:`quantize`; sizes above 1 (more than a server) are an error naming ``what``."""
    x = np.asarray(x, dtype=np.float64)
    if x.size and not np.isfinite(x).all():
        raise InputError(f"{what}: sizes must be finite numbers")
    if x.size and float(x.min()) < 0:
        raise InputError(f"{what}: sizes must be >= 0 (got {float(x.min())})")
    u = np.ceil(x * UNIT - _SLACK).astype(np.int64)
    np.maximum(u, 1, out=u)
    if u.size and int(u.max()) > UNIT:
        raise InputError(f"{what}: a job needs more than a whole server (size {float(x.max()):.6g} > 1)")
    return u


class MaxTree:
    """Max-segment tree over ``n`` integer values: point update and "first index ≥ lo with value ≥ x"."""

    __slots__ = ("n", "size", "t")

    def __init__(self, values: Iterable[int], n: int | None = None, fill: int = NEG) -> None:
        vals = list(values)
        self.n = len(vals) if n is None else n
        size = 1
        while size < max(self.n, 1):
            size <<= 1
        self.size = size
        t = [fill] * (2 * size)
        t[size : size + len(vals)] = vals
        for i in range(size - 1, 0, -1):
            a, b = t[2 * i], t[2 * i + 1]
            t[i] = a if a >= b else b
        self.t = t

    def get(self, i: int) -> int:
        """The value at index ``i``."""
        return self.t[self.size + i]

    def set(self, i: int, v: int) -> None:
        """Set the value at index ``i`` to ``v`` (updates the maxima above it)."""
        t = self.t
        i += self.size
        t[i] = v
        i >>= 1
        while i:
            a, b = t[2 * i], t[2 * i + 1]
            m = a if a >= b else b
            if t[i] == m:
                break
            t[i] = m
            i >>= 1

    def max(self) -> int:
        """The largest value."""
        return self.t[1]

    def find_first(self, x: int, lo: int = 0) -> int:
        """Smallest index ``i >= lo`` with value ``>= x``, or -1."""
        if lo >= self.n:
            return -1
        t = self.t
        size = self.size
        if lo == 0:
            if t[1] < x:
                return -1
            i = 1
        else:
            i = lo + size
            while t[i] < x:
                while i & 1:  # a right child: climb until we are a left child
                    i >>= 1
                if i == 0:
                    return -1
                i += 1  # the right sibling covers the next range
        while i < size:
            i <<= 1
            if t[i] < x:
                i += 1
        i -= size
        return i if i < self.n else -1


class LineServers:
    """``n`` single-resource servers of capacity ``UNIT``, indexed by residual capacity.

    ``by_residual`` keeps a sorted list of (residual, server) for best fit and the maximum residual;
    ``by_index`` keeps a max-segment tree of residuals by server id for first fit and index-order scans.
    Only the indexes a policy asks for are maintained.
    """

    __slots__ = ("bmax_np", "inv_np", "n", "njobs", "room_np", "sorted", "tree", "used")

    def __init__(self, n: int, by_residual: bool = False, by_index: bool = False) -> None:
        if n < 1:
            raise InputError(f"a cluster needs at least one server, got {n}")
        if n > _SERVER_MASK:
            raise InputError(f"at most {_SERVER_MASK} servers are supported, got {n}")
        self.n = n
        self.used = [0] * n
        self.njobs = [0] * n
        self.sorted = SortedList((UNIT << _SERVER_BITS) | s for s in range(n)) if by_residual else None
        self.tree = MaxTree([UNIT] * n) if by_index else None
        self.room_np: np.ndarray | None = None  # free room per server, kept only with placement constraints
        self.inv_np: np.ndarray | None = None
        self.bmax_np: np.ndarray | None = None  # per block of 64 servers: an upper bound of their free room

    def enable_masks(self, inv: list[int]) -> None:
        """Keep flat arrays of free room and complemented server masks for the compiled constrained scans.

        Best and first fit then always run as compiled scans (unconstrained jobs too), so the sorted residual index
        and the index tree are dropped: their upkeep on every placement and departure cost more than the scans.
        """
        self.inv_np = np.array(inv, dtype=np.uint32)
        self.room_np = np.array([UNIT - u for u in self.used], dtype=np.int64)
        nb = (self.n + _BLOCK - 1) // _BLOCK
        pad = np.zeros(nb * _BLOCK, dtype=np.int64)
        pad[: self.n] = self.room_np
        self.bmax_np = pad.reshape(nb, _BLOCK).max(axis=1)
        self.sorted = None  # best fit is the compiled scan, for every mask
        self.tree = None  # and so is first fit

    def residual(self, s: int) -> int:
        """Free capacity of server ``s`` in units."""
        return UNIT - self.used[s]

    def room(self, s: int) -> int:
        """Free capacity of server ``s`` (the argument of the queue's ``best_for``)."""
        return UNIT - self.used[s]

    def fits(self, s: int, x: int) -> bool:
        """Whether a job of ``x`` units fits server ``s``."""
        return self.used[s] + x <= UNIT

    def _move(self, s: int, old_res: int, new_res: int) -> None:
        sl = self.sorted
        if sl is not None:
            sl.remove((old_res << _SERVER_BITS) | s)
            sl.add((new_res << _SERVER_BITS) | s)
        if self.tree is not None:
            self.tree.set(s, new_res)
        if self.room_np is not None:
            self.room_np[s] = new_res
            if new_res > old_res:  # the bound only rises here; the scans lower it to the exact maximum
                b = s >> _BLOCK_BITS
                if new_res > self.bmax_np[b]:
                    self.bmax_np[b] = new_res

    def add(self, s: int, x: int) -> None:
        """Place a job of size ``x`` on ``s`` (the caller checked that it fits)."""
        used = self.used
        old = UNIT - used[s]
        used[s] += x
        self.njobs[s] += 1
        room = self.room_np
        if room is not None and self.sorted is None and self.tree is None:  # only the flat array (room falls here)
            room[s] = old - x
            return
        self._move(s, old, old - x)

    def sub(self, s: int, x: int) -> None:
        """A job of size ``x`` left ``s``."""
        used = self.used
        old = UNIT - used[s]
        used[s] -= x
        self.njobs[s] -= 1
        room = self.room_np
        if room is not None and self.sorted is None and self.tree is None:  # only the flat array and block bounds
            new = old + x
            room[s] = new
            b = s >> _BLOCK_BITS
            if new > self.bmax_np[b]:
                self.bmax_np[b] = new
            return
        self._move(s, old, old + x)

    def max_room(self) -> int:
        """The largest free capacity of any server (a job above it fits nowhere)."""
        if self.sorted is not None:
            return self.sorted[-1] >> _SERVER_BITS
        return self.tree.max()

    def best_fit(self, x: int, accept: Accept = None) -> int:
        """The server with the least residual capacity ≥ ``x`` (lowest id on ties), or -1."""
        sl = self.sorted
        i = sl.bisect_left(x << _SERVER_BITS)
        if accept is None:
            return sl[i] & _SERVER_MASK if i < len(sl) else -1
        for key in sl.islice(i):  # an iterator: no positional lookup per candidate
            s = key & _SERVER_MASK
            if accept(s):
                return s
        return -1

    def best_fit_mask(self, x: int, mask: int, inv: list[int]) -> int:
        """:meth:`best_fit` for a job with constraint ``mask`` (server ``s`` accepts it iff ``mask & inv[s] == 0``)."""
        if self.room_np is not None:
            return _kernels().k_best_fit_blocks(self.room_np, self.inv_np, self.bmax_np, x, mask)
        sl = self.sorted
        i = sl.bisect_left(x << _SERVER_BITS)
        if not mask:
            return sl[i] & _SERVER_MASK if i < len(sl) else -1
        for key in sl.islice(i):
            s = key & _SERVER_MASK
            if not (mask & inv[s]):
                return s
        return -1

    def first_fit_mask(self, x: int, mask: int, lo: int = 0) -> int:
        """:meth:`first_fit` for a job with constraint ``mask`` (needs :meth:`enable_masks`): one compiled scan
        that skips the blocks of servers without room for ``x``."""
        return _kernels().k_first_fit_blocks(self.room_np, self.inv_np, self.bmax_np, lo, x, mask)

    def first_fit(self, x: int, lo: int = 0, accept: Accept = None) -> int:
        """The lowest server id ≥ ``lo`` with residual ≥ ``x``, or -1."""
        tree = self.tree
        s = tree.find_first(x, lo)
        if accept is None:
            return s
        while s >= 0 and not accept(s):
            s = tree.find_first(x, s + 1)
        return s

    def first_room(self, x: int, lo: int = 0) -> int:
        """The lowest server id ≥ ``lo`` that could hold a job of size ``x`` (index-order scans)."""
        return self.tree.find_first(x, lo)


def size_key(x: int, job: int) -> int:
    """Sort key of a queued job: by size, then older (smaller id) jobs above newer ones of equal size."""
    return (x << _JOB_BITS) | (_JOB_MASK - job)


class SizeQueue:
    """Queued jobs sorted by size: largest job that fits a room, smallest queued size."""

    __slots__ = ("sl",)

    def __init__(self) -> None:
        self.sl = SortedList()

    def __len__(self) -> int:
        return len(self.sl)

    def add(self, job: int, x: int) -> None:
        """Queue job ``job`` of ``x`` units."""
        self.sl.add(size_key(x, job))

    def remove(self, job: int, x: int) -> None:
        """Take job ``job`` of ``x`` units out of the queue."""
        self.sl.remove(size_key(x, job))

    def min_size(self) -> int:
        """Smallest queued size (the queue must not be empty)."""
        return self.sl[0] >> _JOB_BITS

    def best_for(self, room: int, used: int | None = None, accept: Accept = None) -> int:
        """The largest queued job of size ≤ ``room`` (oldest among equals), or -1."""
        sl = self.sl
        i = sl.bisect_right((room << _JOB_BITS) | _JOB_MASK) - 1
        if accept is None:
            return _JOB_MASK - (sl[i] & _JOB_MASK) if i >= 0 else -1
        if i < 0:
            return -1
        for key in sl.islice(0, i + 1, reverse=True):
            j = _JOB_MASK - (key & _JOB_MASK)
            if accept(j):
                return j
        return -1


class ArrivalOrder:
    """Queued jobs in arrival order; finds the first one (at or after a position) that fits a room.

    Positions are stable between calls to :meth:`append`; removed jobs leave holes that are compacted
    away when the underlying tree is full (amortized O(1) per job).
    """

    __slots__ = ("alive", "jobs", "pos", "tree")

    def __init__(self, capacity: int = 1024) -> None:
        self.jobs: list[int] = []
        self.pos: dict[int, int] = {}
        self.tree = MaxTree([], n=capacity)
        self.alive = 0

    def __len__(self) -> int:
        return self.alive

    def append(self, job: int, x: int) -> None:
        """Queue job ``job`` of ``x`` units behind the others."""
        if len(self.jobs) >= self.tree.n:
            self._rebuild()
        p = len(self.jobs)
        self.jobs.append(job)
        self.pos[job] = p
        self.tree.set(p, -x)
        self.alive += 1

    def remove(self, job: int) -> None:
        """Take job ``job`` out of the queue."""
        p = self.pos.pop(job)
        self.jobs[p] = -1
        self.tree.set(p, NEG)
        self.alive -= 1

    def position(self, job: int) -> int:
        """The queue position of job ``job``."""
        return self.pos[job]

    def first_fitting(self, room: int, lo: int = 0) -> int:
        """Position of the first queued job at or after ``lo`` with size ≤ ``room``, or -1."""
        return self.tree.find_first(-room, lo)

    def job_at(self, p: int) -> int:
        """The job at queue position ``p`` (-1 if it left)."""
        return self.jobs[p]

    def _rebuild(self) -> None:
        t = self.tree
        live = [(j, -t.get(p)) for p, j in enumerate(self.jobs) if j >= 0]
        cap = max(1024, 2 * len(live) + 1)
        self.tree = MaxTree([-x for _, x in live], n=cap)
        self.jobs = [j for j, _ in live]
        self.pos = {j: p for p, j in enumerate(self.jobs)}


class Constraints:
    """Placement constraints as bit sets: a job fits a server iff ``job_mask & ~server_mask == 0``.

    The driver records each job's mask with :meth:`set` before handing the job to the policy; the policy
    calls the object as ``constraints(job, server)``.
    """

    __slots__ = ("inv", "mask")

    def __init__(self, server_masks: Iterable[int]) -> None:
        self.inv = [~int(m) & 0xFFFFFFFF for m in server_masks]
        self.mask: dict[int, int] = {}

    def set(self, jobs: Iterable[int], masks: Iterable[int]) -> None:
        """Record the constraint masks of ``jobs``."""
        self.mask.update(zip(jobs, (int(m) for m in masks), strict=True))

    def forget(self, job: int) -> None:
        """Drop job ``job``'s mask (it finished)."""
        self.mask.pop(job, None)

    def __call__(self, job: int, server: int) -> bool:
        return (self.mask.get(job, 0) & self.inv[server]) == 0


class MaskedJobs:
    """Queued jobs with constraint masks, grouped for compiled queries (used only when constraints bind).

    ``best(room, inv)`` returns the largest job (oldest among equals) of size ≤ ``room`` whose mask fits
    the server (``mask & inv == 0``), optionally of one type. Jobs with the same (size, mask, type) are
    interchangeable for every query but their age, so they form a *group* chained in insertion order; a query
    looks at the oldest live job of each non-empty group (one compiled pass over the groups: thousands of
    queued jobs share a few hundred masks) instead of scanning the whole queue.

    The state lives in three packed int64 arrays (rows named in :mod:`~megha.schedulers.packing._kernels`): ``P``
    per queued position, ``G`` per group, ``A`` per non-empty group (dense), plus ``abits`` (per mask bit, the
    non-empty groups' slots whose mask has it) and ``st`` (top, lo, nact, then per mask bit the number of non-empty
    groups whose mask has it), so each compiled call takes few arguments.
    """

    SMALL = 48  # at most this many queued jobs: a Python loop beats a compiled call's overhead
    PREFIX = 64  # positions a query first scans from the oldest live job before it looks at the groups

    def __init__(self, capacity: int = 256) -> None:
        self.live: dict[int, tuple[int, int, int]] = {}  # job -> (size, mask, type), in insertion order
        self.P = self._positions(capacity)
        # top (next free position), lo (no live job below it), nact (non-empty groups): one array that the compiled
        # bookkeeping updates in place
        self.st = np.zeros(_kernels().ST_LEN, dtype=np.int64)
        self.pos: dict[int, int] = {}
        self._groups_init(64)
        self._fill_out = np.empty((64, 3), dtype=np.int64)  # fill's result rows (grown with the queue)
        self._k_fill = _kernels().k_mj_fill
        self._fit_out = np.empty((64, 2), dtype=np.int64)  # fit_departed_on's result rows (grown with the queue)
        self._k_fit = _kernels().k_fit_departed_bits
        self._k_take = _kernels().k_mj_take_oldest
        self._k_best_fit = _kernels().k_best_fit_take_many

    @staticmethod
    def _positions(cap: int) -> np.ndarray:
        k = _kernels()
        P = np.zeros((k.P_ROWS, cap), dtype=np.int64)
        P[k.P_ID] = -1
        P[k.P_NEXT] = -1
        return P

    # views of the per-position rows (read-only use: tests and numpy scans)
    @property
    def size(self) -> np.ndarray:
        """Size of the job at each queue position (a row of ``P``)."""
        return self.P[0]

    @property
    def mask(self) -> np.ndarray:
        """Constraint mask of the job at each queue position (a row of ``P``)."""
        return self.P[1]

    @property
    def typ(self) -> np.ndarray:
        """Type of the job at each queue position (a row of ``P``)."""
        return self.P[2]

    @property
    def ids(self) -> np.ndarray:
        """Job id at each queue position (a row of ``P``)."""
        return self.P[3]

    @property
    def alive(self) -> np.ndarray:
        """Whether each queue position still holds a queued job (a row of ``P``)."""
        return self.P[4]

    @property
    def top(self) -> int:
        """The next free queue position."""
        return int(self.st[0])

    @property
    def lo(self) -> int:
        """The lowest position that may hold a live job (none below it)."""
        return int(self.st[1])

    @property
    def nact(self) -> int:
        """The number of non-empty groups."""
        return int(self.st[2])

    def _groups_init(self, cap: int) -> None:
        k = _kernels()
        self.gid: dict[tuple[int, int, int], int] = {}
        self.G = np.zeros((k.G_ROWS, cap), dtype=np.int64)
        self.G[[k.G_HEAD, k.G_TAIL, k.G_SLOT]] = -1
        self.A = np.zeros((k.A_ROWS, cap), dtype=np.int64)
        self.abits = np.zeros((32, (cap + 63) // 64), dtype=np.uint64)  # per mask bit: the slots whose mask has it
        self.st[2:] = 0  # no non-empty group, so no mask bit counted

    def _group(self, x: int, mask: int, typ: int) -> int:
        key = (x, mask, typ)
        g = self.gid.get(key)
        if g is None:
            k = _kernels()
            g = len(self.gid)
            cap = self.G.shape[1]
            if g >= cap:
                G = np.zeros((k.G_ROWS, 2 * cap), dtype=np.int64)
                G[[k.G_HEAD, k.G_TAIL, k.G_SLOT]] = -1
                G[:, :cap] = self.G
                self.G = G
                A = np.zeros((k.A_ROWS, 2 * cap), dtype=np.int64)
                A[:, :cap] = self.A
                self.A = A
                bits = np.zeros((32, (2 * cap + 63) // 64), dtype=np.uint64)
                bits[:, : self.abits.shape[1]] = self.abits
                self.abits = bits
            self.gid[key] = g
            self.G[k.G_SIZE, g] = x
            self.G[k.G_MASK, g] = mask
            self.G[k.G_TYP, g] = typ
        return g

    def add(self, job: int, x: int, mask: int, typ: int = 0) -> None:
        """Queue ``job`` (size ``x`` units, constraint ``mask``, virtual-queue type ``typ``)."""
        self.add_many([job], [x], [mask], [typ])

    def add_many(self, jobs: list[int], xs: list[int], masks: list[int], typs: list[int] | None = None) -> None:
        """Queue several jobs, in order (one compiled call)."""
        n = len(jobs)
        if not n:
            return
        if typs is None:
            typs = [0] * n
        if self.st[0] + n > self.P.shape[1]:
            self._rebuild(n)
        gid = self.gid
        key = (xs[0], masks[0], typs[0])
        if n > 1 and xs.count(key[0]) == n and masks.count(key[1]) == n and typs.count(key[2]) == n:
            # a job's tasks alike (the common arrival): one group lookup
            g = gid.get(key)
            gs = np.full(n, self._group(*key) if g is None else g, dtype=np.int64)
        else:
            gs = []
            for key in zip(xs, masks, typs, strict=True):  # _group's lookup inline; a new group may grow the arrays
                g = gid.get(key)
                gs.append(self._group(*key) if g is None else g)
            gs = np.array(gs, dtype=np.int64)
        pos = _kernels().k_mj_add_many(
            np.array(jobs, dtype=np.int64),
            np.array(xs, dtype=np.int64),
            np.array(masks, dtype=np.int64),
            np.array(typs, dtype=np.int64),
            gs,
            self.st,
            self.P,
            self.G,
            self.A,
            self.abits,
        )
        self.pos.update(zip(jobs, pos.tolist(), strict=True))
        self.live.update(zip(jobs, zip(xs, masks, typs, strict=True), strict=True))

    def remove(self, job: int) -> None:
        """Take ``job`` out of the queue."""
        p = self.pos.pop(job)
        del self.live[job]
        _kernels().k_mj_remove(p, self.st, self.P, self.G, self.A, self.abits)

    def best(self, room: int, inv: int, typ: int = -1) -> int:
        """The largest queued job of size ≤ ``room`` (oldest among equals) whose mask fits a server with complemented
        mask ``inv`` (of virtual-queue type ``typ`` if ``typ >= 0``), or -1."""
        if room < 1:  # every job needs at least one unit (quantize)
            return -1
        if len(self.live) <= self.SMALL:  # the same answer: the first largest in insertion order
            best, bx = -1, 0
            for j, (x, m, t) in self.live.items():
                if bx < x <= room and not (m & inv) and (typ < 0 or t == typ):
                    best, bx = j, x
            return best
        return _kernels().k_mj_best(self.st, self.PREFIX, self.P, self.A, self.abits, room, inv, typ)

    def fill(self, room: int, inv: int, lims: list[tuple[int, int]] | np.ndarray) -> list[list[int]]:
        """A server with free ``room`` and complemented mask ``inv`` takes, for each ``(type, limit)`` in order, the
        largest fitting queued job of that type (any type if ``type < 0``) until ``limit`` of them or none fits, as
        repeated :meth:`best` and :meth:`remove` would (one compiled call): ``[[job, type, size], ...]``. ``lims`` may
        be an ``int64 [k, 2]`` array already (a caller's constant)."""
        live = self.live
        out = self._fill_out
        if out.shape[0] < len(live):  # a row for every queued job: the kernel never runs out of room
            out = self._fill_out = np.empty((2 * len(live), 3), dtype=np.int64)
        if type(lims) is not np.ndarray:
            lims = np.array(lims, dtype=np.int64)
        k = self._k_fill(self.st, self.PREFIX, self.P, self.G, self.A, self.abits, room, inv, lims, out)
        if not k:
            return []
        rows = out[:k].tolist()
        pos = self.pos
        for j, _, _ in rows:
            del pos[j]
            del live[j]
        return rows

    def take_oldest(self, room: int, inv: int) -> list[list[int]]:
        """A server with free ``room`` and complemented mask ``inv`` takes the queued jobs in insertion order, each
        that fits the room left (one compiled call; the jobs leave the queue): ``[[job, size], ...]``, the same
        placements as :meth:`fit_departed` over that one server followed by :meth:`remove` of each."""
        live = self.live
        out = self._fit_out
        if out.shape[0] < len(live):  # a row for every queued job: the kernel never runs out of room
            out = self._fit_out = np.empty((2 * len(live), 2), dtype=np.int64)
        k = self._k_take(self.st, self.PREFIX, self.P, self.G, self.A, self.abits, room, inv, out)
        if not k:
            return []
        rows = out[:k].tolist()
        pos = self.pos
        for j, _ in rows:
            del pos[j]
            del live[j]
        return rows

    def take_best_fit(
        self, jobs: list[int], xs: list[int], masks: list[int], room: np.ndarray, inv: np.ndarray, bmax: np.ndarray
    ) -> list[list[int]]:
        """BF-J over the queued ``jobs`` in order (sizes ``xs``, constraint ``masks``) on a cluster whose free room,
        complemented masks and block room bounds are the arrays ``room``, ``inv`` and ``bmax``
        (:meth:`LineServers.enable_masks`): each job to the compatible server with the least room that fits it (lowest
        id on ties), as :meth:`LineServers.best_fit_mask` would find it, that server's ``room`` lowered by its size, and
        the job dequeued (one compiled call). Returns ``[[index in jobs, server], ...]`` in placement order; the caller
        books the rest of each placement on the servers."""
        n = len(jobs)
        pos = self.pos
        rows = np.empty((n, 3), dtype=np.int64)
        rows[:, 0] = [pos[j] for j in jobs]
        rows[:, 1] = xs
        rows[:, 2] = masks
        out = self._fit_out
        if out.shape[0] < n:
            out = self._fit_out = np.empty((2 * n, 2), dtype=np.int64)
        k = self._k_best_fit(room, inv, bmax, rows, self.st, self.P, self.G, self.A, self.abits, out)
        if not k:
            return []
        res = out[:k].tolist()
        live = self.live
        for i, _ in res:
            j = jobs[i]
            del pos[j]
            del live[j]
        return res

    def fitting_any(self, rooms: list[tuple[int, int]], hi: int | None = None) -> list[int]:
        """Ids (in insertion order) of the jobs that fit at least one of the ``(room, inv)`` servers (only the jobs
        at positions below ``hi`` if given: those added before the job at position ``hi``)."""
        top = self.top if hi is None else hi
        alive = self.alive[:top] != 0
        size = self.size[:top]
        mask = self.mask[:top]
        ok = np.zeros(top, dtype=bool)
        for room, inv in rooms:
            ok |= (size <= room) & ((mask & inv) == 0)
        return self.ids[np.flatnonzero(ok & alive)].tolist()

    def fit_departed(self, rooms: list[int], invs: list[int], hi: int) -> list[tuple[int, int]]:
        """The jobs at positions below ``hi``, in insertion order, each to the tightest of the given servers (free
        ``rooms``, complemented masks ``invs``) that fits it, first on ties: ``[(job, server index), ...]``."""
        rows = self.fit_departed_on(
            np.arange(len(rooms), dtype=np.int64),
            np.array(rooms, dtype=np.int64),
            np.array(invs, dtype=np.uint32),
            hi,
        )
        return [(j, i) for j, i in rows]

    def fit_departed_on(self, servers: np.ndarray, room: np.ndarray, inv: np.ndarray, hi: int) -> list[list[int]]:
        """:meth:`fit_departed` over the ``servers`` of a cluster whose free room and complemented masks are the
        arrays ``room`` and ``inv`` (only read): ``[[job, index in servers], ...]``."""
        out = self._fit_out
        if out.shape[0] < len(self.live):  # a row for every queued job: the kernel never runs out of room
            out = self._fit_out = np.empty((2 * len(self.live), 2), dtype=np.int64)
        k = self._k_fit(self.st, self.PREFIX, self.P, self.G, self.A, self.abits, hi, servers, room, inv, out)
        return out[:k].tolist() if k else []

    def _rebuild(self, extra: int = 1) -> None:
        """Compact the live jobs to the front, with room for at least ``extra`` more."""
        k = _kernels()
        keep = np.flatnonzero(self.P[k.P_ALIVE, : self.top])
        n = keep.size
        cap = max(256, 2 * n + 1, n + extra)
        P = self._positions(cap)
        for r in (k.P_SIZE, k.P_MASK, k.P_TYP, k.P_ID, k.P_ALIVE):
            P[r, :n] = self.P[r, keep]
        self.P = P
        self.st[0] = n
        self.st[1] = 0
        ids = P[k.P_ID, :n].tolist()
        self.pos = {j: p for p, j in enumerate(ids)}
        self._groups_init(max(64, self.G.shape[1]))
        grps = np.zeros(n, dtype=np.int64)
        if n:
            grps, first = _groups_by_first_appearance(P[k.P_SIZE, :n], P[k.P_MASK, :n], P[k.P_TYP, :n])
            for x, m, t in zip(
                P[k.P_SIZE, first].tolist(), P[k.P_MASK, first].tolist(), P[k.P_TYP, first].tolist(), strict=True
            ):
                self._group(x, m, t)  # numbered 0, 1, ... in this order
        k.k_mj_relink(n, grps, self.st, self.P, self.G, self.A, self.abits)


def _groups_by_first_appearance(size: np.ndarray, mask: np.ndarray, typ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The group of each position (equal ``(size, mask, typ)``), groups numbered by first appearance as a loop over
    the positions in order would number them, and each group's first position: one sort (a compaction regroups tens
    of thousands of queued jobs)."""
    n = size.size
    o = np.lexsort((typ, mask, size))
    ss, mm, tt = size[o], mask[o], typ[o]
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = (ss[1:] != ss[:-1]) | (mm[1:] != mm[:-1]) | (tt[1:] != tt[:-1])
    gsorted = np.cumsum(new) - 1  # group per sorted position, numbered by key order
    first = o[new]  # a stable sort: the first position of each key is its group's first appearance
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    grps = np.empty(n, dtype=np.int64)
    grps[o] = rank[gsorted]
    return grps, first[order]
