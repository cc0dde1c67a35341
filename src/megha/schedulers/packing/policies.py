"""The packing policies of Psychas & Ghaderi as small strategy objects shared by both simulators.

A policy sees a central queue and ``n`` servers of capacity ``UNIT`` (sizes in units, see
:mod:`~megha.schedulers.packing.structures`). A driver — the time-slotted core
(:mod:`~megha.schedulers.packing.slotted`) or the event-engine component
(:mod:`~megha.schedulers.packing.component`) — calls, once per slot:

1. :meth:`PackingPolicy.depart` for every job that left a server since the last slot,
2. :meth:`PackingPolicy.arrive` with the slot's new jobs,
3. :meth:`PackingPolicy.schedule`, which returns the ``(job, server)`` placements decided in this slot.

Policies (DESIGN §5.7, paper §IV–VI):

* ``fifo-ff`` — the head-of-line job goes to the lowest-index server with room; stop at the first job that
  fits nowhere (Hadoop-like FIFO with First-Fit packing, the paper's baseline).
* ``bf-j`` — every queued job, in arrival order, goes to the feasible server with least residual capacity.
* ``bf-s`` — every server, in index order, takes the largest queued job that fits, repeatedly.
* ``bf-js`` — BF-S over the servers that had departures, then BF-J over the slot's new arrivals still
  queued (≥ 1/2 of the maximum supportable workload).
* ``vqs`` — virtual queues over the universal partition; a server picks the max-weight configuration of the
  reduced set when it is empty and serves head-of-line jobs of its configuration's types (≥ 2/3).
* ``vqs-bf`` — VQS's configuration choice; a server takes the largest fitting jobs of its configuration's
  types up to their counts, then fills up with BF-S (≥ 2/3, more flexible in practice).

Each policy keeps the invariant "after a slot, no queued job fits where the policy would put it", so a
slot without arrivals or departures costs O(1), and work per slot is proportional to the placements and
departures (each step of a scan places a job), not to the number of servers or queued jobs. The vector
(multi-resource) variants of the Best-Fit family swap in the structures of
:mod:`~megha.schedulers.packing.multires`; VQS and VQS-BF are single-resource (use the max reduction).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sortedcontainers import SortedList

from megha.errors import InputError
from megha.schedulers.packing.partition import ConfigSet, Partition, universal_partition
from megha.schedulers.packing.structures import (
    _BLOCK_BITS,
    _JOB_BITS,
    _JOB_MASK,
    _SERVER_BITS,
    _SERVER_MASK,
    UNIT,
    Accept,
    ArrivalOrder,
    Constraints,
    LineServers,
    MaskedJobs,
    SizeQueue,
    _kernels,
    size_key,
)

if TYPE_CHECKING:
    from megha.schedulers.packing.multires import VectorJobs, VectorServers

Size = int | np.ndarray
"""A job's size in units: an integer, or a vector of units per resource (the vector Best-Fit family)."""

Compat = Callable[[int, int], bool] | None
"""Optional placement-constraint check ``compat(job, server)``; ``None`` = every job fits every server.

A :class:`~megha.schedulers.packing.structures.Constraints` object additionally lets the server-side
queries ("largest queued job that fits this server") run as one numpy scan instead of a Python loop over
incompatible jobs; any other callable works through plain scanning."""

#: :meth:`MaskedJobs.fill`'s limits for "the largest fitting job of any type, until none fits" (BF-S), built once
_ANY_JOB = np.array([[-1, UNIT + 1]], dtype=np.int64)


class PackingPolicy:
    """Base class: bookkeeping shared by every policy (sizes, queue length, placements of the slot)."""

    name = "policy"
    vector_ok = False  # supports vector (multi-resource) sizes

    def __init__(self, n_servers: int, compat: Compat = None) -> None:
        if n_servers < 1:
            raise InputError(f"{self.name}: needs at least one server, got {n_servers}")
        self.n = n_servers
        self.compat = compat
        self.size: dict[int, object] = {}  # job -> size (units, or a vector of units) while queued or running
        self.nqueued = 0
        self._out: list[tuple[int, int]] = []
        self._departed: set[int] = set()
        self._new: list[int] = []
        self._visit_one: Callable[[int], None] | bool | None = False  # False: not asked yet (_one_server_visit)

    # --- driver API ---------------------------------------------------------------------------------
    def arrive(self, jobs: Sequence[int], sizes: Sequence) -> None:
        """New jobs join the queue (sizes in units)."""
        size = self.size
        for j, x in zip(jobs, sizes, strict=True):
            size[j] = x
            self._enqueue(j, x)
        self.nqueued += len(jobs)
        self._new.extend(jobs)

    def depart(self, job: int, server: int) -> None:
        """A running job left its server."""
        x = self.size.pop(job)
        self._release(job, server, x)
        self._departed.add(server)

    def schedule(self) -> list[tuple[int, int]]:
        """Decide this slot's placements; returns ``[(job, server), ...]``."""
        dep = self._departed
        if len(dep) == 1 and not self._new:  # the common slot: one server had departures, nothing arrived
            visit = self._visit_one
            if visit is False:
                visit = self._visit_one = self._one_server_visit()
            if visit is not None:
                self._out = out = []
                s = dep.pop()
                if self.nqueued:
                    visit(s)
                return out
        self._out = out = []
        if self.nqueued:
            self._schedule()
        dep.clear()
        self._new.clear()
        return out

    def _one_server_visit(self) -> Callable[[int], None] | None:
        """What :meth:`_schedule` does in a slot where only server ``s`` had departures and nothing arrived, as a
        method of ``s`` that :meth:`schedule` calls directly (fewer calls on the common path); None: no shortcut."""
        return None

    def queue_len(self) -> int:
        """The number of queued jobs."""
        return self.nqueued

    def describe(self) -> dict:
        """The policy's settings, for the run's description."""
        return {"policy": self.name}

    # --- to implement -------------------------------------------------------------------------------
    def _enqueue(self, job: int, x: Size) -> None:
        raise NotImplementedError

    def _release(self, job: int, server: int, x: Size) -> None:
        raise NotImplementedError

    def _schedule(self) -> None:
        raise NotImplementedError

    def residual(self, s: int) -> Size:
        """Free capacity of server ``s`` (units, or units per resource)."""
        raise NotImplementedError

    # --- helpers ------------------------------------------------------------------------------------
    def _job_accept(self, s: int) -> Accept:
        """Predicate over jobs for server ``s`` (None when unconstrained)."""
        c = self.compat
        if c is None:
            return None
        return lambda j: c(j, s)

    def _server_accept(self, j: int) -> Accept:
        c = self.compat
        if c is None:
            return None
        return lambda s: c(j, s)


def _visit_changed(policy: PackingPolicy, room: np.ndarray, inv: np.ndarray, visit: Callable[[int], None]) -> None:
    """Server-order scans (BF-S, VQS-BF) under placement constraints: visit only the servers that can take a job.

    Such a scan visits the servers in index order, each taking queued jobs until none fits, so after a slot no
    queued job fits any server. A server without departures this slot still has the same room, so it can only
    take a job that arrived this slot: visiting, in index order, the servers with departures and the servers
    some still-queued new job fits (found by one compiled scan) makes the same placements as visiting every
    server with room, whose other visits place nothing and change nothing.
    """
    if not policy._new and len(policy._departed) == 1:  # the common pass: one server freed room, nothing arrived
        if policy.nqueued:
            for s in policy._departed:
                visit(s)
        return
    n = room.size
    dep = sorted(policy._departed)
    masked = policy.masked
    new = [j for j in policy._new if j in masked.pos]
    out = policy._out
    if new:
        mask = policy.compat.mask
        size = policy.size
        xs = np.array([size[j] for j in new], dtype=np.int64)
        ms = np.array([mask.get(j, 0) for j in new], dtype=np.uint32)
        alive = np.ones(len(new), dtype=np.bool_)
        where = {j: i for i, j in enumerate(new)}
        scan = _kernels().k_first_fit_any
    di = 0
    lo = 0
    while policy.nqueued:
        while di < len(dep) and dep[di] < lo:
            di += 1
        s = dep[di] if di < len(dep) else n
        if new:
            t = scan(room, inv, lo, s, xs, ms, alive)
            if t >= 0:
                s = t
        if s >= n:
            return
        k = len(out)
        visit(s)
        if new:
            for j, _ in out[k:]:
                i = where.get(j)
                if i is not None:
                    alive[i] = False
        lo = s + 1


class _BestFitFamily(PackingPolicy):
    """Shared state of FIFO-FF, BF-J, BF-S and BF-J/S: a server index and a queue index."""

    vector_ok = True
    needs: tuple[str, ...] = ()  # which indexes the policy uses

    def __init__(
        self,
        n_servers: int,
        compat: Compat = None,
        servers: LineServers | VectorServers | None = None,
        queue_factory: Callable[[], SizeQueue | VectorJobs] | None = None,
        order_factory: Callable[[], ArrivalOrder | VectorJobs] | None = None,
    ) -> None:
        super().__init__(n_servers, compat)
        if servers is None:
            servers = LineServers(n_servers, by_residual="residual" in self.needs, by_index="index" in self.needs)
        self.servers = servers
        self.by_size = (queue_factory or SizeQueue)() if "size" in self.needs else None
        self.by_arrival = (order_factory or ArrivalOrder)() if "arrival" in self.needs else None
        self.fifo: deque[int] | None = deque() if "fifo" in self.needs else None
        self.masked = (
            MaskedJobs()
            if isinstance(compat, Constraints)
            and isinstance(servers, LineServers)
            and ("size" in self.needs or "arrival" in self.needs)
            else None
        )
        if isinstance(compat, Constraints) and isinstance(servers, LineServers):
            servers.enable_masks(compat.inv)
        if self.masked is not None:  # the constrained paths query the masked queue and the flat room array only
            self.by_size = self.by_arrival = None
            servers.tree = None
        # the servers' room as the one flat array LineServers.add/sub keep (only with constraints), for depart
        flat = type(servers) is LineServers and servers.sorted is None and servers.tree is None
        self._flat_room: np.ndarray | None = servers.room_np if flat else None

    def residual(self, s: int) -> Size:
        return self.servers.room(s)

    def arrive(self, jobs: Sequence[int], sizes: Sequence) -> None:
        """:meth:`PackingPolicy.arrive`; under constraints the jobs join the masked queue in one compiled call."""
        masked = self.masked
        if masked is None:
            return super().arrive(jobs, sizes)
        jobs = list(jobs)
        sizes = list(sizes)
        self.size.update(zip(jobs, sizes, strict=True))
        mask = self.compat.mask
        masked.add_many(jobs, sizes, [mask.get(j, 0) for j in jobs])  # _enqueue's only index here
        self.nqueued += len(jobs)
        self._new.extend(jobs)

    def _enqueue(self, job: int, x: Size) -> None:
        if self.by_size is not None:
            self.by_size.add(job, x)
        if self.by_arrival is not None:
            self.by_arrival.append(job, x)
        if self.fifo is not None:
            self.fifo.append(job)
        if self.masked is not None:
            self.masked.add(job, x, self.compat.mask.get(job, 0))

    def _release(self, job: int, server: int, x: Size) -> None:
        self.servers.sub(server, x)

    def depart(self, job: int, server: int) -> None:
        """A running job left its server (:meth:`PackingPolicy.depart` without the indirection)."""
        x = self.size.pop(job)
        srv = self.servers
        room = self._flat_room
        if room is None:
            srv.sub(server, x)
        else:  # LineServers.sub when only the flat arrays are kept (constraints)
            used = srv.used
            new = UNIT - used[server] + x
            used[server] -= x
            srv.njobs[server] -= 1
            room[server] = new
            b = server >> _BLOCK_BITS
            if new > srv.bmax_np[b]:
                srv.bmax_np[b] = new
        self._departed.add(server)

    def _place(self, j: int, s: int, x: Size) -> None:
        """Move queued job ``j`` to server ``s`` (removes it from every queue index except ``fifo``)."""
        if self.by_size is not None:
            self.by_size.remove(j, x)
        if self.by_arrival is not None:
            self.by_arrival.remove(j)
        if self.masked is not None:
            self.masked.remove(j)
        self.servers.add(s, x)
        self.nqueued -= 1
        self._out.append((j, s))

    def _fill_server(self, s: int) -> None:
        """BF-S on one server: the largest (best-aligned) queued job that fits, until none fits."""
        srv = self.servers
        size = self.size
        masked = self.masked
        if masked is not None:  # the largest fitting job until none fits, found and dequeued by one compiled call
            rows = masked.fill(UNIT - srv.used[s], self.compat.inv[s], _ANY_JOB)
            if rows:
                out = self._out
                for j, _, x in rows:
                    srv.add(s, x)
                    out.append((j, s))
                self.nqueued -= len(rows)
            return
        q = self.by_size
        accept = self._job_accept(s)
        while self.nqueued:
            j = q.best_for(srv.room(s), srv.used[s], accept)
            if j < 0:
                return
            self._place(j, s, size[j])

    def _best_fit_new(self, jobs: list[int]) -> None:
        """BF-J on the queued ``jobs`` in order, as :meth:`_best_fit_job` on each would place them: under constraints
        on single-resource servers one compiled call finds, books the room and dequeues every placement."""
        if not jobs:
            return
        srv = self.servers
        c = self.compat
        if self.masked is None or type(c) is not Constraints or type(srv) is not LineServers or srv.room_np is None:
            for j in jobs:
                self._best_fit_job(j)
            return
        size = self.size
        mask = c.mask
        xs = [size[j] for j in jobs]
        rows = self.masked.take_best_fit(jobs, xs, [mask.get(j, 0) for j in jobs], srv.room_np, srv.inv_np, srv.bmax_np)
        if rows:
            used = srv.used
            njobs = srv.njobs
            out = self._out
            for i, s in rows:  # LineServers.add without the room (the kernel lowered it)
                used[s] += xs[i]
                njobs[s] += 1
                out.append((jobs[i], s))
            self.nqueued -= len(rows)

    def _best_fit_job(self, j: int) -> bool:
        """BF-J on one queued job: to the feasible server with least residual (best alignment)."""
        x = self.size[j]
        c = self.compat
        srv = self.servers
        if type(c) is Constraints and type(srv) is LineServers:
            if srv.room_np is not None:  # LineServers.best_fit_mask's compiled scan, called directly
                s = _kernels().k_best_fit_blocks(srv.room_np, srv.inv_np, srv.bmax_np, x, c.mask.get(j, 0))
            else:
                s = srv.best_fit_mask(x, c.mask.get(j, 0), c.inv)
        else:
            s = self.servers.best_fit(x, self._server_accept(j))
        if s < 0:
            return False
        self._place(j, s, x)
        return True


class FifoFF(_BestFitFamily):
    """FIFO with First-Fit: serve the queue in order, each job to the lowest-index server with room."""

    name = "fifo-ff"
    needs = ("index", "fifo")

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._blocked = False

    def _schedule(self) -> None:
        q = self.fifo
        srv = self.servers
        size = self.size
        if self._blocked:
            # the head fitted no server at the last slot and only the servers with departures gained room since:
            # its first fit now is the lowest of those that fits it (no scan of the whole cluster)
            if not self._departed:
                return
            j = q[0]
            x = size[j]
            s = self._first_departed_fit(j, x)
            if s < 0:
                return
            q.popleft()
            self._place(j, s, x)
        cons = self.compat if type(self.compat) is Constraints and srv.room_np is not None else None
        while q:
            j = q[0]
            x = size[j]
            if cons is not None:
                s = srv.first_fit_mask(x, cons.mask.get(j, 0))
            else:
                s = srv.first_fit(x, 0, self._server_accept(j))
            if s < 0:
                break
            q.popleft()
            self._place(j, s, x)
        self._blocked = bool(q)

    def _first_departed_fit(self, j: int, x: Size) -> int:
        """The lowest-index server with a departure this slot that job ``j`` (size ``x``) fits, or -1."""
        srv = self.servers
        compat = self.compat
        for s in sorted(self._departed):
            if srv.fits(s, x) and (compat is None or compat(j, s)):
                return s
        return -1


class BFJ(_BestFitFamily):
    """Best-Fit from the job's perspective, over the whole queue in arrival order every slot."""

    name = "bf-j"
    needs = ("residual", "arrival")

    def _schedule(self) -> None:
        if self.masked is not None:
            return self._schedule_constrained()
        order = self.by_arrival
        srv = self.servers
        if self._departed:
            p = 0
        elif self._new:
            p = order.position(self._new[0])  # older jobs fit nowhere: servers only got fuller
        else:
            return
        while self.nqueued:
            p = order.first_fitting(srv.max_room(), p)
            if p < 0:
                return
            j = order.job_at(p)
            self._best_fit_job(j)  # may fail for vectors or constraints: the room test is necessary only
            p += 1

    def _one_server_visit(self) -> Callable[[int], None] | None:
        return self._take_oldest if self.masked is not None else None

    def _take_oldest(self, s: int) -> None:
        """The constrained pass when only server ``s`` had departures and nothing arrived: it takes the old jobs that
        fit it, oldest first, found and dequeued by one compiled call."""
        srv = self.servers
        rows = self.masked.take_oldest(srv.room_np.item(s), self.compat.inv[s])
        if rows:
            out = self._out
            used = srv.used
            njobs = srv.njobs
            room = srv.room_np
            for j, x in rows:  # LineServers.add on the flat room array
                used[s] += x
                njobs[s] += 1
                room[s] = UNIT - used[s]
                out.append((j, s))
            self.nqueued -= len(rows)

    def _schedule_constrained(self) -> None:
        """Same decisions with placement constraints: after a slot no queued job fits any compatible server,
        so older jobs can only go to servers that had departures — one compiled pass over the queue places them
        there — then the new arrivals go, in arrival order, over all servers."""
        srv = self.servers
        size = self.size
        if not self._new and len(self._departed) == 1:
            for s in self._departed:
                self._take_oldest(s)
            return
        if self._departed:
            dep = sorted(self._departed)
            masked = self.masked
            hi = masked.pos[self._new[0]] if self._new else masked.top  # the older jobs only
            for j, i in masked.fit_departed_on(np.array(dep, dtype=np.int64), srv.room_np, srv.inv_np, hi):
                self._place(j, dep[i], size[j])
        if self._out:
            placed = {j for j, _ in self._out}
            self._best_fit_new([j for j in self._new if j not in placed])
        else:
            self._best_fit_new(self._new)


class BFS(_BestFitFamily):
    """Best-Fit from the server's perspective: servers in index order take the largest fitting jobs."""

    name = "bf-s"
    needs = ("index", "size")

    def _schedule(self) -> None:
        if not self._departed and not self._new:
            return
        if self.masked is not None:
            return self._schedule_constrained()
        q = self.by_size
        srv = self.servers
        lo = 0
        while self.nqueued:
            s = srv.first_room(q.min_size(), lo)
            if s < 0:
                return
            self._fill_server(s)
            lo = s + 1

    def _one_server_visit(self) -> Callable[[int], None] | None:
        return self._fill_server if self.masked is not None else None  # _visit_changed's first case

    def _schedule_constrained(self) -> None:
        """Same decisions with placement constraints, visiting only the servers that can take a job."""
        srv = self.servers
        _visit_changed(self, srv.room_np, srv.inv_np, self._fill_server)


class BFJS(_BestFitFamily):
    """BF-J/S: BF-S over servers with departures, then BF-J over the slot's new arrivals (paper §IV-A)."""

    name = "bf-js"
    needs = ("residual", "size")

    def _one_server_visit(self) -> Callable[[int], None] | None:
        return self._fill_server

    def _schedule(self) -> None:
        if not self._new:  # the common pass: departures only (BF-S over those servers)
            if len(self._departed) == 1:
                for s in self._departed:
                    self._fill_server(s)
            else:
                for s in sorted(self._departed):
                    if not self.nqueued:
                        break
                    self._fill_server(s)
            return
        if self._departed:
            for s in sorted(self._departed):
                if not self.nqueued:
                    break
                self._fill_server(s)
        if self.nqueued:  # BF-J over the new jobs the BF-S step did not place
            if self._out:
                placed = {j for j, _ in self._out}
                self._best_fit_new([j for j in self._new if j not in placed])
            else:
                self._best_fit_new(self._new)


# ------------------------------------------------------------------------------------------------------
# Partition-based policies (single resource)
# ------------------------------------------------------------------------------------------------------
class _VirtualQueues(PackingPolicy):
    """State shared by VQS and VQS-BF: types, per-server configuration and per-type counts."""

    def __init__(
        self,
        n_servers: int,
        compat: Compat = None,
        partition: Partition | None = None,
        configs: ConfigSet | None = None,
        J: int = 6,
    ) -> None:
        super().__init__(n_servers, compat)
        self.partition = partition or universal_partition(J)
        self.cs = configs or ConfigSet(self.partition)
        if self.cs.partition is not self.partition:
            raise InputError("VQS: the configuration set was built for another partition")
        self.T = self.partition.n_types
        self.typ: dict[int, int] = {}
        self.nq = [0] * self.T  # Q_j: jobs in virtual queue j
        self.used = [0] * n_servers
        self.njobs = [0] * n_servers
        self.cfg = [-1] * n_servers

    def residual(self, s: int) -> int:
        return UNIT - self.used[s]

    def describe(self) -> dict:
        p = self.partition
        return {
            "policy": self.name,
            "virtual_queues": p.describe(),
            "configurations": [c.label(p) for c in self.cs.configs],
        }

    def arrive(self, jobs: Sequence[int], sizes: Sequence) -> None:
        eff = self.partition.effective
        super().arrive(jobs, [eff(x) for x in sizes])


class VQS(_VirtualQueues):
    """Virtual Queue Scheduling (paper §V-B): max-weight configuration when empty, head-of-line service.

    A server in configuration (reserved r, other j) keeps one type-r job in a reserved 2/3 of its capacity
    and packs head-of-line type-j jobs into the rest (1/3, or all of it in a single-type configuration),
    each virtual queue served in FIFO order until its head no longer fits.
    """

    name = "vqs"

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        n = self.n
        self.vq: list[deque[int]] = [deque() for _ in range(self.T)]
        self.occ = [0] * n  # units of the configuration's "other" type in the server
        self.has_res = [0] * n
        # servers waiting for jobs of type j, keyed by the room they have for them
        self.by_avail: list[SortedList] = [SortedList() for _ in range(self.T)]
        self.wait_res = SortedList()  # mixed-configuration servers without their reserved job
        self.empty: SortedList | None = SortedList(range(n))  # unconstrained runs: empty servers in index order
        self._empty_np: np.ndarray | None = None  # constrained runs: empty servers as a boolean array (in their place)
        self._inv_np: np.ndarray | None = None
        # constrained runs: the servers' state mirrored in arrays for the compiled scan of the servers to fill
        # (``k_vqs_next``: free room, configuration room, other type, waiting for the reserved job) and the
        # virtual queues' heads (size, -1 if empty; mask)
        self._used_np: np.ndarray | None = None
        if isinstance(self.compat, Constraints):
            self.empty = None  # step 1 scans _empty_np
            self._empty_np = np.ones(n, dtype=bool)
            self._n_empty = n  # its number of True entries (no scan when no server is empty)
            self._inv_np = np.array(self.compat.inv, dtype=np.uint32)
            self._used_np = np.zeros(n, dtype=np.int64)
            self._avail_np = np.zeros(n, dtype=np.int64)
            self._oth_np = np.full(n, -1, dtype=np.int64)
            self._nres_np = np.zeros(n, dtype=np.int8)
            self._hx = np.full(self.T, -1, dtype=np.int64)
            self._hm = np.zeros(self.T, dtype=np.int64)
        # constrained runs: the heads (use_a, mask_a, use_b, mask_b) for which the last renewal scan from the first
        # server found no empty server that fits, and the servers emptied since (only they can fit those heads now)
        self._miss: tuple | None = None
        self._emptied: list[int] = []
        # constrained runs, step 3: per type t, a head size for which the last scan found no server of configuration
        # type t with that much configuration room (None: unknown), and the servers mirrored since (only they can
        # have gained room or a configuration)
        self._no_room: list[int | None] = [None] * self.T
        self._dirty: list[int] = []

    def _enqueue(self, job: int, x: int) -> None:
        t = self.partition.type_of(x)
        self.typ[job] = t
        self.vq[t].append(job)
        self.nq[t] += 1

    def _mirror(self, s: int) -> None:
        """Constrained runs: copy server ``s``'s state into the arrays the compiled scan reads."""
        self._dirty.append(s)
        self._used_np[s] = self.used[s]
        c = self.cfg[s]
        if c < 0:
            self._oth_np[s] = -1
            self._nres_np[s] = 0
            return
        conf = self.cs.configs[c]
        self._oth_np[s] = conf.other
        self._avail_np[s] = conf.space - self.occ[s]
        self._nres_np[s] = 1 if conf.res >= 0 and not self.has_res[s] else 0

    def _head(self, t: int) -> None:
        """Constrained runs: refresh the head of virtual queue ``t`` for the compiled scan."""
        if t < 0:
            return
        q = self.vq[t]
        if q:
            j = q[0]
            self._hx[t] = self.size[j]
            self._hm[t] = self.compat.mask.get(j, 0)
        else:
            self._hx[t] = -1

    def _fill_scan(self, cand: np.ndarray, q: deque) -> None:
        """Constrained runs: fill the servers ``cand`` in order while ``q`` has jobs, as calling :meth:`_fill` on
        each would, but skipping by one compiled scan the servers a fill would leave unchanged."""
        for t in range(self.T):
            self._head(t)
        r = self.cs.res_type
        scan = _kernels().k_vqs_next
        inv, used, avail, oth, nres, hx, hm = (
            self._inv_np,
            self._used_np,
            self._avail_np,
            self._oth_np,
            self._nres_np,
            self._hx,
            self._hm,
        )
        i = 0
        while q:
            p = scan(cand, i, inv, used, avail, oth, nres, hx, hm, r, UNIT)
            if p < 0:
                return
            s = int(cand[p])
            self._fill(s)
            self._head(r)
            self._head(int(oth[s]))
            i = p + 1

    def _set_avail(self, s: int, old: int, new: int) -> None:
        if self._used_np is not None:  # constrained runs find these servers in the mirrored arrays
            return
        o = self.cs.configs[self.cfg[s]].other
        sl = self.by_avail[o]
        sl.remove((old << _SERVER_BITS) | s)
        sl.add((new << _SERVER_BITS) | s)

    def _release(self, job: int, server: int, x: int) -> None:
        s = server
        t = self.typ.pop(job)
        self.used[s] -= x
        self.njobs[s] -= 1
        c = self.cs.configs[self.cfg[s]]
        if c.res >= 0 and t == c.res:
            self.has_res[s] = 0
            self.wait_res.add(s)
        else:
            old = c.space - self.occ[s]
            self.occ[s] -= x
            self._set_avail(s, old, old + x)
        if not self.njobs[s]:
            self._clear(s)
        if self._used_np is not None:
            self._mirror(s)

    def _clear(self, s: int) -> None:
        """Server ``s`` is empty: it drops its configuration (and renews it when it next has work)."""
        c = self.cs.configs[self.cfg[s]]
        if self._used_np is None:
            self.by_avail[c.other].remove(((c.space - self.occ[s]) << _SERVER_BITS) | s)
        if c.res >= 0 and not self.has_res[s]:
            self.wait_res.remove(s)
        self.cfg[s] = -1
        self.occ[s] = 0
        self.has_res[s] = 0
        if self._empty_np is None:
            self.empty.add(s)
        else:
            self._empty_np[s] = True
            self._n_empty += 1
            if self._miss is not None:
                self._emptied.append(s)
                if len(self._emptied) > self.n:  # long without a renewal: forget the last miss instead
                    self._miss = None
                    self._emptied.clear()

    def _place(self, j: int, s: int, t: int) -> None:
        x = self.size[j]
        self.vq[t].popleft()
        self.nq[t] -= 1
        self.nqueued -= 1
        self.used[s] += x
        self.njobs[s] += 1
        self._out.append((j, s))

    def _fill(self, s: int) -> int:
        """Serve server ``s`` from its configuration's queues; returns the number of jobs placed."""
        c = self.cs.configs[self.cfg[s]]
        placed = 0
        compat = self.compat
        size = self.size
        if c.res >= 0 and not self.has_res[s]:
            q = self.vq[c.res]
            if q:
                j = q[0]
                if self.used[s] + size[j] <= UNIT and (compat is None or compat(j, s)):
                    self._place(j, s, c.res)
                    self.has_res[s] = 1
                    self.wait_res.discard(s)
                    placed += 1
        o = c.other
        if o >= 0:
            q = self.vq[o]
            if q:
                old = c.space - self.occ[s]
                avail = old
                room = UNIT - self.used[s]
                while q:
                    j = q[0]
                    x = size[j]
                    if x > avail or x > room or (compat is not None and not compat(j, s)):
                        break
                    self._place(j, s, o)
                    avail -= x
                    room -= x
                    placed += 1
                if avail != old:
                    self.occ[s] += old - avail
                    self._set_avail(s, old, avail)
        if placed and self._used_np is not None:
            self._mirror(s)
        return placed

    def _renew(self, s: int, c: int | None = None) -> bool:
        """Empty server ``s`` takes the max-weight configuration (``c`` if the caller chose it for the queues as they
        are) and serves it; False if it stays empty."""
        if c is None:
            c = self.cs.best(self.nq)
        if c < 0:
            return False
        if self._empty_np is None:
            self.empty.remove(s)
        else:
            self._empty_np[s] = False
            self._n_empty -= 1
        self.cfg[s] = c
        conf = self.cs.configs[c]
        if conf.res >= 0:
            self.wait_res.add(s)
        if self._used_np is None:
            self.by_avail[conf.other].add((conf.space << _SERVER_BITS) | s)
        if self._fill(s):
            return True
        # nothing placed (only possible with placement constraints): stay empty
        if conf.res >= 0:
            self.wait_res.discard(s)
        if self._used_np is None:
            self.by_avail[conf.other].remove((conf.space << _SERVER_BITS) | s)
        self.cfg[s] = -1
        if self._empty_np is None:
            self.empty.add(s)
        else:
            self._empty_np[s] = True
            self._n_empty += 1
            self._mirror(s)
        return False

    def _renew_constrained(self) -> None:
        """Step 1 with placement constraints, same decisions as trying :meth:`_renew` on every empty server in index
        order: a renewal fails, changing nothing, unless the head of the chosen configuration's reserved queue or of
        its other queue fits the server, so the next server that can renew is found by one numpy scan (empty
        servers hold nothing: used 0, occupancy 0, no reserved job)."""
        cs = self.cs
        size = self.size
        mask = self.compat.mask
        inv = self._inv_np
        empty = self._empty_np
        scan = _kernels().k_first_empty_fit
        invl = self.compat.inv
        lo = 0
        while self.nqueued:
            c = cs.best(self.nq)
            if c < 0:
                return
            conf = cs.configs[c]
            use_a = use_b = False
            ma = mb = 0
            if conf.res >= 0 and self.vq[conf.res]:
                j = self.vq[conf.res][0]
                if size[j] <= UNIT:
                    use_a, ma = True, mask.get(j, 0)
            if conf.other >= 0 and self.vq[conf.other]:
                j = self.vq[conf.other][0]
                if size[j] <= conf.space and size[j] <= UNIT:
                    use_b, mb = True, mask.get(j, 0)
            if not (use_a or use_b):
                return
            key = (use_a, ma, use_b, mb)
            if lo == 0 and key == self._miss:
                # no empty server fitted these heads at the last full scan: only one emptied since can fit now
                s = -1
                for e in self._emptied:
                    if empty[e] and (e < s or s < 0):
                        v = invl[e]
                        if (use_a and not v & ma) or (use_b and not v & mb):
                            s = e
                if s < 0:
                    self._emptied.clear()  # each is busy again or does not fit these heads
            else:
                s = scan(empty, inv, lo, ma, use_a, mb, use_b) if self._n_empty else -1
                if s < 0 and lo == 0:
                    self._miss = key
                    self._emptied.clear()
            if s < 0:
                return
            placed = self._renew(s, c)  # the queues did not change since c was chosen
            assert placed, "VQS: a renewal the scan found possible placed nothing"
            lo = s + 1

    def _schedule(self) -> None:
        # 1) empty servers (re)choose a configuration, in index order
        if self._empty_np is not None:
            self._renew_constrained()
        else:
            empty = self.empty
            i = 0
            while self.nqueued and i < len(empty):
                if not self._renew(empty[i]):
                    i += 1
        # 2) mixed-configuration servers missing their reserved job
        r = self.cs.res_type
        if r >= 0:
            wait = self.wait_res
            q = self.vq[r]
            if self._used_np is not None:
                if q and wait:
                    self._fill_scan(np.fromiter(wait, dtype=np.int64, count=len(wait)), q)
            else:
                i = 0
                while q and i < len(wait):
                    s = wait[i]
                    self._fill(s)
                    if not self.has_res[s]:
                        i += 1
        # 3) servers with room for the head of each virtual queue
        size = self.size
        if self._used_np is not None:
            self._fill_room_constrained()
            return
        for t in range(self.T):
            q = self.vq[t]
            if not q:
                continue
            sl = self.by_avail[t]
            if not sl:
                continue
            if self.compat is None:
                while q and sl and (sl[-1] >> _SERVER_BITS) >= size[q[0]]:
                    if not self._fill(sl[-1] & _SERVER_MASK):
                        break
            else:
                lo = sl.bisect_left(size[q[0]] << _SERVER_BITS)
                for key in list(sl.islice(lo))[::-1]:
                    if not q:
                        break
                    self._fill(key & _SERVER_MASK)

    def _fill_room_constrained(self) -> None:
        """Step 3 with placement constraints: per virtual queue, the servers of its configuration type with room for
        its head, by room then index, largest first (the order of ``by_avail[t]``, which only unconstrained runs keep),
        from the mirrors. When the last scan for a head no larger found none, only the servers mirrored since can
        qualify, so only they are looked at."""
        size = self.size
        oth = self._oth_np
        avail = self._avail_np
        no_room = self._no_room
        for t in range(self.T):
            q = self.vq[t]
            if not q:
                no_room[t] = None
                continue
            x = size[q[0]]
            last = no_room[t]
            if last is not None and x >= last:
                oth_at, avail_at = oth.item, avail.item  # Python ints: no numpy scalar per comparison
                keys = {(avail_at(s) << _SERVER_BITS) | s for s in self._dirty if oth_at(s) == t and avail_at(s) >= x}
                if not keys:  # the common case: no server mirrored since has room for the head
                    no_room[t] = x
                    continue
                cand = np.array([k & _SERVER_MASK for k in sorted(keys, reverse=True)], dtype=np.int64)
            else:
                cand = _kernels().k_vqs_room(oth, avail, t, x, _SERVER_BITS)
            if cand.size:
                no_room[t] = None
                self._fill_scan(cand, q)
            else:
                no_room[t] = x
        self._dirty.clear()


class VQSBF(_VirtualQueues):
    """VQS-BF (paper §VI): VQS's configurations, largest-first within them, then BF-S for the rest.

    Every slot, every server (in index order) with room for the smallest queued job: (1) renews its
    configuration if it is empty; (2) takes the largest fitting jobs of the reserved type and then of the
    configuration's other type until it holds ``k`` of each (jobs reserve exactly their size); (3) fills
    the remaining room with BF-S (largest fitting job of any type).
    """

    name = "vqs-bf"

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        # keys by size, oldest first (unconstrained runs; with constraints the masked queue holds the jobs)
        self.vq: list[SortedList] = [SortedList() for _ in range(self.T)]
        self.cnt = [0] * (self.n * self.T)  # per-server per-type job counts
        self.tree = LineServers(self.n, by_index=True).tree  # residual by server id
        self._lower = [self.partition.lower_units(k) for k in range(self.T)]
        self.masked = MaskedJobs() if isinstance(self.compat, Constraints) else None
        self._room_np: np.ndarray | None = None  # constrained runs: free room per server for the compiled scan
        self._inv_np: np.ndarray | None = None
        if self.masked is not None:
            self._room_np = np.full(self.n, UNIT, dtype=np.int64)
            self._lims = np.zeros((3, 2), dtype=np.int64)  # _visit_masked's limits
            # ... and, per configuration (-1: none), the limits of an empty server (it holds no job of any type),
            # built once; None where they depend on the server's counts
            self._lims_empty = {c: self._limits_of_empty(c) for c in range(-1, len(self.cs.configs))}
            self._inv_np = np.array(self.compat.inv, dtype=np.uint32)

    def _enqueue(self, job: int, x: int) -> None:
        t = self.partition.type_of(x)
        self.typ[job] = t
        self.nq[t] += 1
        if self.masked is not None:  # the masked queue answers every query: no sorted virtual queues
            self.masked.add(job, x, self.compat.mask.get(job, 0), t)
        else:
            self.vq[t].add(size_key(x, job))

    def arrive(self, jobs: Sequence[int], sizes: Sequence) -> None:
        """:meth:`_VirtualQueues.arrive`; under constraints the jobs join the masked queue in one compiled call."""
        masked = self.masked
        if masked is None:
            return super().arrive(jobs, sizes)
        eff = self.partition.effective
        jobs = list(jobs)
        sizes = list(sizes)
        n = len(jobs)
        type_of = self.partition.type_of
        typ = self.typ
        nq = self.nq
        if n and sizes.count(sizes[0]) == n:  # a job's tasks alike (every task in slot mode): one size, one type
            x = eff(sizes[0])
            t = type_of(x)
            xs = [x] * n
            ts = [t] * n
            self.size.update(dict.fromkeys(jobs, x))
            typ.update(dict.fromkeys(jobs, t))
            nq[t] += n
        else:
            xs = [eff(x) for x in sizes]
            self.size.update(zip(jobs, xs, strict=True))
            ts = []
            for j, x in zip(jobs, xs, strict=True):  # _enqueue with the masked queue in place of the virtual queues
                t = type_of(x)
                typ[j] = t
                nq[t] += 1
                ts.append(t)
        masked.add_many(jobs, xs, [self.compat.mask.get(j, 0) for j in jobs], ts)
        self.nqueued += len(jobs)
        self._new.extend(jobs)

    def _release(self, job: int, server: int, x: int) -> None:
        s = server
        t = self.typ.pop(job)
        self.used[s] -= x
        self.njobs[s] -= 1
        self.cnt[s * self.T + t] -= 1
        if self._room_np is not None:  # constrained: the compiled scans read the flat array, not the tree
            self._room_np[s] = UNIT - self.used[s]
        else:
            self.tree.set(s, UNIT - self.used[s])

    def depart(self, job: int, server: int) -> None:
        """:meth:`PackingPolicy.depart` with :meth:`_release` inline (one call per departure)."""
        s = server
        x = self.size.pop(job)
        t = self.typ.pop(job)
        self.used[s] -= x
        self.njobs[s] -= 1
        self.cnt[s * self.T + t] -= 1
        if self._room_np is not None:  # constrained: the compiled scans read the flat array, not the tree
            self._room_np[s] = UNIT - self.used[s]
        else:
            self.tree.set(s, UNIT - self.used[s])
        self._departed.add(s)

    def _place(self, key: int, s: int, t: int) -> int:
        j = _JOB_MASK - (key & _JOB_MASK)
        x = key >> _JOB_BITS
        if self.masked is not None:
            self.masked.remove(j)
        else:
            self.vq[t].remove(key)
        self.nq[t] -= 1
        self.nqueued -= 1
        self.used[s] += x
        self.njobs[s] += 1
        self.cnt[s * self.T + t] += 1
        self._out.append((j, s))
        return x

    def _largest_in(self, t: int, room: int, accept: Accept, s: int) -> int:
        """Key of the largest job ≤ room in virtual queue t (oldest among equals), or -1."""
        if self.masked is not None:
            j = self.masked.best(room, self.compat.inv[s], t)
            return -1 if j < 0 else size_key(self.size[j], j)
        sl = self.vq[t]
        i = sl.bisect_right((room << _JOB_BITS) | _JOB_MASK) - 1
        while i >= 0:
            key = sl[i]
            if accept is None or accept(_JOB_MASK - (key & _JOB_MASK)):
                return key
            i -= 1
        return -1

    def _largest(self, room: int, accept: Accept, s: int) -> tuple[int, int]:
        """(key, type) of the largest queued job ≤ room over all virtual queues, or (-1, -1)."""
        if self.masked is not None:
            j = self.masked.best(room, self.compat.inv[s])
            return (-1, -1) if j < 0 else (size_key(self.size[j], j), self.typ[j])
        lower = self._lower
        t = 0
        while t < self.T and lower[t] >= room:  # every job of type t is larger than room
            t += 1
        while t < self.T:
            if self.nq[t]:
                key = self._largest_in(t, room, accept, s)
                if key >= 0:
                    return key, t
            t += 1
        return -1, -1

    def _min_size(self) -> int:
        for t in range(self.T - 1, -1, -1):
            if self.nq[t]:
                return self.vq[t][0] >> _JOB_BITS
        return UNIT + 1

    def _visit(self, s: int) -> None:
        if self.masked is not None:
            return self._visit_masked(s)
        if not self.njobs[s]:
            self.cfg[s] = self.cs.best(self.nq)
        accept = None if self.masked is not None else self._job_accept(s)  # the masked queue checks masks itself
        room = UNIT - self.used[s]
        base = s * self.T
        c = self.cfg[s]
        if c >= 0:
            conf = self.cs.configs[c]
            for t, k in ((conf.res, conf.k_res), (conf.other, conf.k_other)):
                if t < 0:
                    continue
                while self.cnt[base + t] < k and self.nq[t]:
                    key = self._largest_in(t, room, accept, s)
                    if key < 0:
                        break
                    room -= self._place(key, s, t)
        while self.nqueued:
            key, t = self._largest(room, accept, s)
            if key < 0:
                break
            room -= self._place(key, s, t)
        if self._room_np is not None:
            self._room_np[s] = room
        else:
            self.tree.set(s, room)

    def _limits_of_empty(self, c: int) -> np.ndarray:
        """:meth:`_visit_masked`'s ``(type, limit)`` rows for an empty server in configuration ``c`` (no job counted
        yet): each type of the configuration up to its count, then any type until none fits."""
        if c < 0:
            return _ANY_JOB
        conf = self.cs.configs[c]
        rows = [(t, k) for t, k in ((conf.res, conf.k_res), (conf.other, conf.k_other)) if t >= 0]
        return np.array([*rows, (-1, UNIT + 1)], dtype=np.int64) if rows else _ANY_JOB

    def _visit_masked(self, s: int) -> None:
        """:meth:`_visit` under constraints (configuration renewal included): the same placements, found and taken by
        one compiled call."""
        base = s * self.T
        room = UNIT - self.used[s]
        if not self.njobs[s]:  # an empty server renews its configuration: its limits are the configuration's own
            c = self.cfg[s] = self.cs.best(self.nq)
            lims = self._lims_empty[c]
        else:
            c = self.cfg[s]
            lims = None if c >= 0 else _ANY_JOB
        if lims is None:
            buf = self._lims  # (type, limit) rows written in place: no array built per visit
            n = 0
            conf = self.cs.configs[c]
            for t, k in ((conf.res, conf.k_res), (conf.other, conf.k_other)):
                if t >= 0:
                    buf[n, 0] = t
                    buf[n, 1] = k - self.cnt[base + t]
                    n += 1
            if n:
                buf[n, 0] = -1  # then any type, until none fits
                buf[n, 1] = UNIT + 1
                lims = buf[: n + 1]
            else:
                lims = _ANY_JOB
        rows = self.masked.fill(room, self.compat.inv[s], lims)
        if rows:
            nq, cnt, out = self.nq, self.cnt, self._out
            for j, t, x in rows:
                nq[t] -= 1
                cnt[base + t] += 1
                room -= x
                out.append((j, s))
            n = len(rows)
            self.nqueued -= n
            self.njobs[s] += n
            self.used[s] = UNIT - room
        self._room_np[s] = room

    def _one_server_visit(self) -> Callable[[int], None] | None:
        return self._visit_masked if self.masked is not None else None  # _visit_changed's first case

    def _schedule(self) -> None:
        if not self._departed and not self._new:
            return
        if self.masked is not None:
            return _visit_changed(self, self._room_np, self._inv_np, self._visit_masked)
        lo = 0
        tree = self.tree
        while self.nqueued:
            s = tree.find_first(self._min_size(), lo)
            if s < 0:
                return
            self._visit(s)
            lo = s + 1


POLICIES: dict[str, type[PackingPolicy]] = {p.name: p for p in (FifoFF, BFJ, BFS, BFJS, VQS, VQSBF)}


def make_policy(
    name: str,
    n_servers: int,
    compat: Compat = None,
    *,
    J: int = 6,
    split_tail: bool = False,
    config_set: str = "reduced",
    reserve: float = 2.0 / 3.0,
    cuts: list[float] | None = None,
    vector: int = 0,
) -> PackingPolicy:
    """Build policy ``name`` for ``n_servers`` servers.

    ``J``, ``split_tail``, ``cuts`` (explicit partition cut points), ``config_set`` ("reduced" or "pure")
    and ``reserve`` configure VQS/VQS-BF. ``vector=R > 0`` builds the multi-resource (Tetris-scored)
    variant of a Best-Fit-family policy for R resources.
    """
    cls = POLICIES.get(name)
    if cls is None:
        raise InputError(f"unknown packing policy {name!r}; known: {', '.join(POLICIES)}")
    if issubclass(cls, _VirtualQueues):
        if vector:
            raise InputError(
                f"{name}: multi-resource (tetris) packing is only available for the Best-Fit "
                "family (fifo-ff, bf-j, bf-s, bf-js); use the max reduction"
            )
        from megha.schedulers.packing.partition import custom_partition

        part = custom_partition(cuts, min_size=0.0) if cuts else universal_partition(J, split_tail)
        return cls(n_servers, compat, partition=part, configs=ConfigSet(part, config_set, reserve))
    if vector:
        from megha.schedulers.packing.multires import vector_structures

        servers, qf, of = vector_structures(n_servers, vector)
        return cls(n_servers, compat, servers=servers, queue_factory=qf, order_factory=of)
    return cls(n_servers, compat)
