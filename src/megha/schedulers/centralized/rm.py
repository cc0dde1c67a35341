"""A YARN-like central resource manager (MACRM's baseline, DESIGN §5.4) as a sans-I/O component.

One RM holds the only queue and the only view of the cluster. It allocates a container to a node only while
processing that node's heartbeat: a task that arrives is booked on a suitable free node and launched at that
node's next heartbeat, a task that finds none waits in the queue until a node's heartbeat reports a finished
container and frees room that the task fits. Queue policy ``fifo`` (first queued task that fits the node),
``fair`` (users served by fewest running containers, FIFO within a user — YARN's fair scheduler with one queue per
user) or ``fewest-tasks`` (a task of the job with the fewest queued tasks that fits the node, ties to the older
job). ``am_overhead`` delays a job's requests by its application master's start-up time.

Which suitable free node an arriving task is booked on is the *scan* (nodes in heartbeat-phase order, the first
suitable free node from a start position). ``first`` and ``rotate`` start at the node whose heartbeat comes
soonest after the arrival, so the task waits least — as YARN gives a pending request to the first node with room
that heartbeats; they differ in the schedule the deployment builds (``rotate``: heartbeats drift against the
clock, see :mod:`~megha.schedulers.centralized.heartbeats`). ``random`` starts at a uniformly random node for each
task (the CapacityScheduler's asynchronous scheduling loop starts at a random node); the task then waits for that
node's heartbeat, up to one period.

The RM tracks every container it allocated and releases it when a heartbeat reports it finished, so its view
never promises a node more than it has. Simulation shortcut (heartbeats that change nothing are not simulated): an
arriving task is booked at once on the node the scan finds and launched at that node's next tick; if another
suitable node frees and heartbeats even earlier, the task still waits for its booked tick (at most one period).
Constraint matching uses the shared packed index, laid out in heartbeat phase order so a scan is one rotated
first-set-bit search.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model import bitset
from megha.model.matching import FastRandom, SegmentedIndex, WaitQueue
from megha.schedulers.centralized.heartbeats import HeartbeatSchedule
from megha.schedulers.centralized.messages import (
    LaunchFailed,
    NodeHeartbeat,
    NodesAccepted,
    NodesLost,
    NodesRegistered,
    Resync,
)
from megha.schedulers.common.fewest import FewestTasksQueue
from megha.schedulers.common.messages import JobArrival, Launch
from megha.sim.component import Component

_first_and_from = None  # the compiled node scan, imported on first use so the CLI starts fast
_claim_scan = None  # the compiled node scan of a job's tasks


def _load_scan() -> Callable[[np.ndarray, np.ndarray, int], int]:
    global _first_and_from
    from megha.schedulers.centralized._kernels import first_and_from

    _first_and_from = first_and_from
    return first_and_from


def _load_claim_scan() -> Callable[..., int]:
    global _claim_scan
    from megha.schedulers.centralized._kernels import claim_scan

    _claim_scan = claim_scan
    return claim_scan


_EPS = 1e-9
QUEUES = ("fifo", "fair", "fewest-tasks")
SCANS = ("first", "rotate", "random")
RECOVERY = ("work-preserving", "kept")

#: a task asking for a container: ``(task, duration or None, demand vector or None, user)``
Entry = tuple[int, float | None, "np.ndarray | None", int]


def _as_list(x: list | np.ndarray) -> list:
    return x if isinstance(x, list) else x.tolist()


class ResourceManager(Component):
    """The central RM: heartbeat-gated allocation, FIFO, fair or fewest-tasks queue."""

    kind = "rm"

    def __init__(
        self,
        address: str,
        pool: str,
        node_managers: str,
        worker_masks: np.ndarray,
        capacity: np.ndarray | None,
        schedule: HeartbeatSchedule,
        recorder: TaskRecorder,
        queue: str = "fifo",
        am_overhead: float = 0.0,
        heartbeat_latency: float = 0.0005,
        scan: str = "rotate",
        recovery: str = "work-preserving",
    ) -> None:
        super().__init__(address)
        if recovery not in RECOVERY:
            raise ValueError(f"{address}: recovery must be one of {', '.join(RECOVERY)}, got {recovery!r}")
        if queue not in QUEUES:
            raise ValueError(f"{address}: queue must be one of {', '.join(QUEUES)}, got {queue!r}")
        if scan not in SCANS:
            raise ValueError(f"{address}: scan must be one of {', '.join(SCANS)}, got {scan!r}")
        if am_overhead < 0:
            raise ValueError(f"{address}: am_overhead must be >= 0, got {am_overhead}")
        self.pool = pool
        self.nm = node_managers
        self.rec = recorder
        self.schedule = schedule
        self.queue_policy = queue
        self.scan = scan
        self._rnd: FastRandom | None = None
        self.am_overhead = float(am_overhead)
        self.hb_latency = float(heartbeat_latency)
        self.index = SegmentedIndex([schedule.order], worker_masks, cache_size=1 << 15)
        self.idle = self.index.all_available()  # nodes with room (RM view), bit order = heartbeat phase order
        self.mask_of: list[int] = worker_masks.tolist()
        n = int(worker_masks.size)
        self.resource = capacity is not None
        self.busy = None if self.resource else [False] * n
        self.free = None if capacity is None else np.array(capacity, dtype=np.float64)
        self.queues: dict[int, WaitQueue | FewestTasksQueue] = {}
        self.running_by_user: dict[int, int] = {}
        self.user_of: dict[int, int] = {}
        self.claims: dict[int, list] = {}  # node -> entries allocated at its next heartbeat
        self._jobs_waiting_am: dict[int, JobArrival] = {}
        self._launch: tuple[list, list, list, list] = ([], [], [], [])
        self.stats = {
            "allocated_at_arrival": 0,
            "queued": 0,
            "allocated_from_queue": 0,
            "heartbeats": 0,
            "claim_heartbeats": 0,
            "max_queue": 0,
        }
        self._queued = 0
        # --- faults (see megha.schedulers.centralized.faults) ---
        self.capacity = None if capacity is None else np.array(capacity, dtype=np.float64)
        self.recovery = recovery
        self.ver: list[int] | None = None  # each node's state version as the RM knows it (created by a first fault)
        self.down: set[int] = set()  # nodes the RM knows dead: its view of them is written off
        self.syncing = 0  # after a restart: the resync epoch whose re-registration the RM waits for (0: none)
        self._epoch = 0
        self._guard = False  # heartbeats may name nodes the RM holds no view of (down, or syncing)
        self._hb = "hb"  # key of the claims' heartbeat timers (another after a restart: earlier ones are void)
        # the applications' record of their tasks (the AMs re-request lost containers): task -> (duration, mask, job)
        self.task_info: Callable[[int], tuple[float, int, int]] | None = None

    def on_start(self, now: float) -> None:
        self._rnd = FastRandom(self.port.rng)

    # --- messages ----------------------------------------------------------------------------------
    def on_message(self, msg: Any, now: float) -> None:
        if isinstance(msg, NodeHeartbeat):
            self._heartbeat(msg, now)
        elif isinstance(msg, JobArrival):
            if self.am_overhead > 0:
                self._jobs_waiting_am[msg.job] = msg
                self.port.set_timer(self.am_overhead, ("am", msg.job))
            else:
                self._submit(msg, now)
        elif isinstance(msg, NodesLost):
            self._nodes_lost(msg, now)
        elif isinstance(msg, NodesRegistered):
            self._nodes_registered(msg, now)
        elif isinstance(msg, LaunchFailed):
            self.stats["launches_failed"] = self.stats.get("launches_failed", 0) + len(msg.tasks)
            self._requeue_lost(msg.tasks, msg.demands, now)
        else:
            super().on_message(msg, now)
        self._flush(now)

    def on_timer(self, key: Hashable, now: float) -> None:
        kind, x = key
        if kind == self._hb:  # the heartbeat of a free node we allocated to
            self.stats["claim_heartbeats"] += 1
            self._launch_claims(x)
        elif kind == "am":  # the job's application master is up and asks for its containers
            self._submit(self._jobs_waiting_am.pop(x), now)
        # else: a heartbeat timer set before a restart (its claims were asked for again)
        self._flush(now)

    # --- arrivals --------------------------------------------------------------------------------------
    def _submit(self, msg: JobArrival, now: float) -> None:
        user = msg.user if self.queue_policy == "fair" else 0
        demands = msg.demands
        q = self.queues.get(user)
        if q is None:
            q = self.queues[user] = FewestTasksQueue() if self.queue_policy == "fewest-tasks" else WaitQueue()
            self.running_by_user.setdefault(user, 0)
        random_start = self.scan == "random"
        if not random_start:
            start = self.schedule.rotation(now)
        n_bits = self.index.n_bits
        queued = 0
        held: list = []
        held_masks: list[int] = []
        fewest = self.queue_policy == "fewest-tasks"
        tasks = msg.tasks.tolist()
        durations = msg.durations.tolist()
        masks = msg.masks.tolist()
        if self.resource:
            nodes = None
        else:  # slot mode: the job's node scan in one compiled call (_claim_bit and _take's cleared bit, per task)
            index = self.index
            which_of = {m: k for k, m in enumerate(dict.fromkeys(masks))}
            which = [which_of[m] for m in masks]
            static = index._cache
            statics = np.empty((len(which_of), index.n_words), dtype=np.uint64)
            for m, k in which_of.items():
                v = static.get(m)
                statics[k] = index.static_vector(m) if v is None else v
            if random_start:
                starts = np.array([self._rnd.below(n_bits) for _ in range(len(tasks))], dtype=np.int64)
            else:
                starts = np.full(len(tasks), start, dtype=np.int64)
            out = np.empty(len(tasks), dtype=np.int64)
            found = (_claim_scan or _load_claim_scan())(
                self.idle, statics, np.array(which, dtype=np.int64), starts, index.worker_at_bit, out
            )
            nodes = out.tolist() if found else None
        for i, (t, d, m) in enumerate(zip(tasks, durations, masks, strict=True)):
            dem = None if demands is None else demands[i]
            entry = (t, d, dem, user)
            if nodes is not None:
                node = nodes[i]
            elif self.resource:
                if random_start:
                    start = self._rnd.below(n_bits)
                bit = self._claim_bit(m, dem, start)
                node = -1 if bit < 0 else int(self.index.worker_at_bit[bit])
            else:
                node = -1
            if node < 0:
                if fewest:
                    held.append(entry)
                    held_masks.append(m)
                else:  # q.push_back(entry, m), inlined (a WaitQueue)
                    slot = q._slot_of.get(m)
                    if slot is None:
                        slot = q._slot(m)
                    q._back += 1
                    b = q._buckets[slot]
                    if not b:
                        q._heads[slot] = q._back
                        q._empty_slots -= 1
                    b.append((q._back, entry))
                    q._len += 1
                queued += 1
            elif nodes is None:
                self._claim(node, entry, now)
            else:
                self._claim(node, entry, now, booked=True)
        if held:
            q.push_job(msg.job, held, held_masks)
        if queued:
            self.stats["queued"] += queued
            self._queued += queued
            if self._queued > self.stats["max_queue"]:
                self.stats["max_queue"] = self._queued

    def _claim_bit(self, mask: int, demand: np.ndarray | None, start: int) -> int:
        """Bit (heartbeat order) of the first suitable node with room at or after ``start``, wrapping; or -1."""
        idx = self.index
        if not self.resource:
            scan = _first_and_from or _load_scan()
            return scan(self.idle, idx.static_vector(mask), start)
        cand = idx.candidates(self.idle, mask)
        bits = bitset.set_indices(cand)
        if bits.size == 0:
            return -1
        k = int(np.searchsorted(bits, start))
        if k:
            bits = np.concatenate([bits[k:], bits[:k]])
        nodes = idx.worker_at_bit[bits]
        ok = (self.free[nodes] + _EPS >= demand).all(axis=1)
        j = int(ok.argmax())
        return int(bits[j]) if ok[j] else -1

    def _claim(self, node: int, entry: Entry, now: float, booked: bool = False) -> None:
        """Book ``entry`` on ``node`` for its next heartbeat (``booked``: its idle bit is cleared already)."""
        if booked:  # _take, slot mode, without the idle bit
            self.busy[node] = True
            if self.queue_policy == "fair":
                self.running_by_user[entry[3]] += 1
                self.user_of[entry[0]] = entry[3]
        else:
            self._take(node, entry)
        lst = self.claims.get(node)
        if lst is None:
            self.claims[node] = [entry]
            tick = self.schedule.next_tick(node, now)
            self.port.set_timer(tick - now + self.hb_latency, (self._hb, node))
        else:
            lst.append(entry)
        self.stats["allocated_at_arrival"] += 1

    def _take(self, node: int, entry: Entry) -> None:
        """Book ``entry``'s task on ``node`` in the RM's view."""
        if self.resource:
            f = self.free[node]
            f -= entry[2]
            if not (f > _EPS).all():
                self.index.set_worker(self.idle, node, False)
        else:
            self.busy[node] = True
            self.index.set_worker(self.idle, node, False)
        if self.queue_policy == "fair":
            self.running_by_user[entry[3]] += 1
            self.user_of[entry[0]] = entry[3]

    def _launch_claims(self, node: int) -> None:
        lst = self.claims.pop(node, None)
        if lst:
            for e in lst:
                self._add_launch(node, e)

    # --- heartbeats ----------------------------------------------------------------------------------
    def _heartbeat(self, msg: NodeHeartbeat, now: float) -> None:
        if self._guard:
            self._heartbeat_guarded(msg, now)
            return
        nodes = _as_list(msg.nodes)
        tasks = _as_list(msg.tasks)
        self.stats["heartbeats"] += len(nodes)
        if tasks:
            self.rec.completion_known(tasks, now)
            if self.resource:
                np.add.at(self.free, np.asarray(msg.task_nodes, dtype=np.int64), msg.demands)
            else:
                busy = self.busy
                for w in _as_list(msg.task_nodes):
                    busy[w] = False
            if self.queue_policy == "fair":
                for t in tasks:
                    self.running_by_user[self.user_of.pop(t)] -= 1
        for node in nodes:
            self._launch_claims(node)
            self._fill(node)

    def _fill(self, node: int) -> None:
        """Allocate queued tasks to ``node`` while they fit; mark it idle if room is left."""
        wm = self.mask_of[node]
        if not self.resource:
            if self.busy[node]:
                return
            e = self._pop(wm, None) if self._queued else None
            if e is None:
                self.index.set_worker(self.idle, node, True)
                return
            self._take(node, e)
            self._add_launch(node, e)
            return
        free = self.free[node]
        while self._queued:
            e = self._pop(wm, free)
            if e is None:
                break
            self._take(node, e)
            self._add_launch(node, e)
        if (free > _EPS).all():
            self.index.set_worker(self.idle, node, True)

    def _pop(self, worker_mask: int, free: np.ndarray | None) -> Entry | None:
        """The next queued entry (policy order) that fits a node with ``worker_mask`` and room ``free``."""
        if len(self.queues) == 1:  # FIFO (or a single user)
            qs = self.queues.values()
        else:
            qs = [
                self.queues[u]
                for u in sorted((u for u, q in self.queues.items() if q), key=lambda u: (self.running_by_user[u], u))
            ]
        for q in qs:
            if free is None:
                e = q.pop_first_fitting(worker_mask)
            else:
                e = q.pop_first_fitting_where(worker_mask, lambda x: bool((x[2] <= free + _EPS).all()))
            if e is not None:
                self._queued -= 1
                self.stats["allocated_from_queue"] += 1
                return e
        return None

    # --- launches ------------------------------------------------------------------------------------
    def _add_launch(self, node: int, entry: Entry) -> None:
        lt, lw, ld, lm = self._launch
        lt.append(entry[0])
        lw.append(node)
        ld.append(entry[1])
        lm.append(entry[2])

    def _flush(self, now: float) -> None:
        lt, lw, ld, lm = self._launch
        if not lt:
            return
        self._launch = ([], [], [], [])
        self.rec.decided(lt, now)
        # lists: cheaper than arrays for the one-task launches of a busy cluster (the node managers accept both)
        self.port.send(self.pool, Launch(lt, lw, ld, self.nm, None if lm[0] is None else np.array(lm)))

    # --- faults: node failures and RM restarts (see megha.schedulers.centralized.faults) ---------------------------
    def _versions(self) -> list[int]:
        if self.ver is None:
            self.ver = [1] * len(self.mask_of)  # 2·incarnation + 1 while up, 2·incarnation once it died
        return self.ver

    def _set_guard(self) -> None:
        self._guard = bool(self.down) or bool(self.syncing)

    def _write_off(self, node: int) -> None:
        """The RM's view of ``node`` is gone (it died, or the RM restarted): nothing is allocated there."""
        if self.resource:
            self.free[node] = 0.0
        else:
            self.busy[node] = True
        self.index.set_worker(self.idle, node, False)

    def _node_empty(self, node: int) -> None:
        """``node`` (re-)registered empty: all its room is free."""
        if self.resource:
            self.free[node] = self.capacity[node]
        else:
            self.busy[node] = False

    def _heartbeat_guarded(self, msg: NodeHeartbeat, now: float) -> None:
        """:meth:`_heartbeat` while some nodes are down or the RM waits for the re-registration after a restart:
        completions count, but the view of a node the RM holds none of is left alone (it died after sending the
        heartbeat; a restarted RM learns the node's room from its re-registration, which follows the heartbeat)."""
        nodes = _as_list(msg.nodes)
        tasks = _as_list(msg.tasks)
        self.stats["heartbeats"] += len(nodes)
        down = self.down
        if tasks:
            self.rec.completion_known(tasks, now)
            if self.queue_policy == "fair":
                for t in tasks:
                    self.running_by_user[self.user_of.pop(t)] -= 1
            if not self.syncing:
                for i, w in enumerate(_as_list(msg.task_nodes)):
                    if w in down:
                        continue
                    if self.resource:
                        self.free[w] += msg.demands[i]
                    else:
                        self.busy[w] = False
        if self.syncing:
            return
        for node in nodes:
            if node not in down:
                self._launch_claims(node)
                self._fill(node)

    def _nodes_lost(self, msg: NodesLost, now: float) -> None:
        """The liveness monitor declares nodes dead: their view is written off until they register again,
        containers booked on them for their next heartbeat and the containers that died with them are asked for
        again. A report older than what the RM knows of a node (a restarted RM re-learned it) only requeues."""
        ver = self._versions()
        back: list = []
        for w, v in zip(msg.nodes, msg.incs, strict=True):
            if v <= ver[w]:
                continue
            ver[w] = v
            if w not in self.down:
                self.down.add(w)
                self._write_off(w)
                for e in self.claims.pop(w, ()):
                    self._untake(e)
                    back.append(e)
        self._set_guard()
        if back:
            self._requeue(back, now)
        if msg.lost:
            tasks = [x[0] for x in msg.lost]
            dems = None if not self.resource else [x[2] for x in msg.lost]
            self._requeue_lost(tasks, dems, now)
        self.stats["nodes_lost"] = self.stats.get("nodes_lost", 0) + len(msg.nodes)

    def _nodes_registered(self, msg: NodesRegistered, now: float) -> None:
        """Node managers (re-)register: after a restart of the RM (``resync``) with their containers, else a node
        that came back empty; the RM accepts the registration (the node takes launches again) and fills it."""
        if msg.resync:
            if msg.resync == self.syncing:
                self._resynced(msg, now)
            return
        ver = self._versions()
        up = []
        for w, v in zip(msg.nodes, msg.incs, strict=True):
            if v <= ver[w]:
                continue
            ver[w] = v
            if w not in self.down:  # never learned it died: what it had is gone
                self._write_off(w)
                back = self.claims.pop(w, ())
                for e in back:
                    self._untake(e)
                self._requeue(list(back), now)
            self.down.discard(w)
            if not self.syncing:
                self._node_empty(w)
            up.append(w)
        self._set_guard()
        if up:
            self._accept(up)
            if not self.syncing:
                for w in up:
                    self._fill(w)

    def _accept(self, nodes: list[int]) -> None:
        """Tell the node managers the RM knows ``nodes``' current incarnation (FIFO after every launch it sent
        against an older one, which they refuse)."""
        self.port.send(self.nm, NodesAccepted(list(nodes), [self.ver[w] for w in nodes]))

    def _resynced(self, msg: NodesRegistered, now: float) -> None:
        """The node managers' answer to :class:`Resync`: the RM's view of every node rebuilt from their state."""
        ver = self._versions()
        n = len(ver)
        if list(msg.nodes) != list(range(n)):
            raise ValueError(f"{self.address}: a resync registration must list every node, in order")
        self.syncing = 0
        alive = []
        for w, v in zip(msg.nodes, msg.incs, strict=True):
            if v >= ver[w]:
                ver[w] = v
            if ver[w] & 1:
                self.down.discard(w)
                self._node_empty(w)
                alive.append(w)
            else:
                self.down.add(w)
        for i, w in enumerate(_as_list(msg.task_nodes)):
            if w in self.down or msg.incs[w] != ver[w]:
                continue  # died (or came back empty) since the registration was taken: its containers are reported
            if self.resource:
                self.free[w] -= msg.demands[i]
            else:
                self.busy[w] = True
        self._set_guard()
        self._accept(alive)
        self._refill(alive)

    def _refill(self, nodes: list[int]) -> None:
        """After a rebuild of the view: queued tasks to the nodes with room (each node's registration stands for its
        heartbeat), the others marked idle."""
        for w in nodes:
            self._fill(w)

    def on_recover(self, now: float) -> None:
        """A restart of the RM (fault schedules, kind ``rm``). ``recovery="kept"``: it comes back with the state it
        had. ``work-preserving`` (the default; Hadoop's work-preserving RM restart): the applications and their
        outstanding requests survive (state store; the AMs re-send their asks), containers keep running, but the
        scheduler's view of the nodes is rebuilt from the node managers' re-registration, and containers it had
        allocated but not yet launched are asked for again. Until the registration arrives nothing is allocated."""
        if self.recovery == "kept":
            return
        self.stats["restarts"] = self.stats.get("restarts", 0) + 1
        back = [e for lst in self.claims.values() for e in lst]
        self.claims = {}
        for e in back:
            self._untake(e)
        self.idle[:] = 0
        for w in range(len(self.mask_of)):
            self._write_off(w)
        self._epoch += 1
        self.syncing = self._epoch
        self._hb = f"hb{self._epoch}"
        self._set_guard()
        self._requeue(back, now)  # to the queue: nothing is allocated before the view is rebuilt
        self._resync(now)
        self._flush(now)

    def _resync(self, now: float) -> None:
        """Ask the node managers to re-register (the separate node managers answer with a message)."""
        self.port.send(self.nm, Resync(self.syncing))

    def _requeue_lost(self, tasks: list[int], demands: np.ndarray | list | None, now: float) -> None:
        """Containers lost with their node, or launches that did not start: their applications ask again."""
        fair = self.queue_policy == "fair"
        entries = []
        for i, t in enumerate(tasks):
            user = 0
            if fair:
                user = self.user_of.pop(t)
                self.running_by_user[user] -= 1
            entries.append((t, None, None if demands is None else np.asarray(demands[i]), user))
        self._requeue(entries, now)

    def _requeue(self, entries: list, now: float) -> None:
        """Tasks ask for a container again (entries ``(task, duration or None, demand, user)``): booked at once on
        a suitable node with room, as on arrival, else at the head of the queue (``fewest-tasks``: behind their
        job's queued tasks). Their constraints are the application's, as before."""
        if not entries:
            return
        info = self.task_info
        if info is None:
            raise ValueError(f"{self.address}: requeueing lost tasks needs task_info (set by the fault handler)")
        self.stats["requeued"] = self.stats.get("requeued", 0) + len(entries)
        start = self.schedule.rotation(now)
        fewest = self.queue_policy == "fewest-tasks"
        heads: list = []
        for t, _, dem, user in entries:
            dur, mask, job = info(t)
            entry = (t, dur, dem, user)
            if not self.syncing:
                if self.scan == "random":
                    start = self._rnd.below(self.index.n_bits)
                bit = self._claim_bit(mask, dem, start)
                if bit >= 0:
                    self._claim(int(self.index.worker_at_bit[bit]), entry, now)
                    continue
            q = self.queues.get(user)
            if q is None:
                q = self.queues[user] = FewestTasksQueue() if fewest else WaitQueue()
                self.running_by_user.setdefault(user, 0)
            if fewest:
                q.push_job(job, [entry], [mask])
            else:
                heads.append((q, entry, mask))
            self._queued += 1
        for q, entry, mask in reversed(heads):  # the head of the queue, in the order they were lost
            q.push_front(entry, mask)

    def _untake(self, entry: Entry) -> None:
        """Undo :meth:`_take`'s per-user accounting of a booking that is given up."""
        if self.queue_policy == "fair":
            self.running_by_user[entry[3]] -= 1
            self.user_of.pop(entry[0], None)

    def queued(self) -> int:
        """Tasks waiting in the RM's queue."""
        return self._queued
