"""A simulator-only YARN-like RM that runs the node managers in-process (slot mode).

With :class:`~megha.schedulers.centralized.nodemanager.NodeManagers` as a separate component, every container
costs a ``Launch`` message (RM → node managers, one network delay), a timer at its node's first heartbeat tick
after it ends and a ``NodeHeartbeat`` message back — three engine events. :class:`SimResourceManager` keeps
exactly that timing but handles the node managers' side in-process: the start the node managers would have
recorded is recorded when the RM commits a launch, and the heartbeat reaches the RM through one absolute-time
timer at the instant the ``NodeHeartbeat`` message would have arrived (containers reported at the same tick share
it). The node managers' checks (one container per node: a :class:`~megha.schedulers.common.ledger.WorkerLedger` and
its error) and counters are kept, and the message counts report the ``Launch`` and ``NodeHeartbeat`` messages
modelled; the communication delay of a launch is recorded as the engine would.

Only the order of events that fall at exactly the same simulated instant may differ from the multi-component form
(a heartbeat is ordered by when its container was launched, not by when the node managers' timer fired), so
results are the same unless two unrelated events coincide to the last bit. The deployment uses it in slot mode
when the engine has no processing model (per-message costs need real messages).

Faults: the in-process node managers fail and come back through :meth:`SimResourceManager.fail_nodes` and
:meth:`SimResourceManager.restore_nodes` (the fault handler passes what they report to the RM's inbox). A launch
committed before its node died but due to reach it after (its start was recorded ahead of time) is withdrawn and
reported with the lost containers; a launch the RM commits to a node that is dead, or whose newer incarnation it has
not learned of, does not start and is asked for again. A container whose heartbeat is on its way when its node dies
(at most ``heartbeat_latency``) is lost with it. An RM restart rebuilds the view at once from the in-process node
managers' state (their re-registration).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from heapq import heappush
from typing import Any

import numpy as np

from megha.metrics.recorder import FLUSH_EVERY, TaskRecorder
from megha.schedulers.centralized.messages import NodeHeartbeat, NodesLost, NodesRegistered
from megha.schedulers.centralized.rm import ResourceManager
from megha.schedulers.common.ledger import WorkerLedger
from megha.schedulers.common.messages import Launch
from megha.sim.component import Port, timer_queue_of

_INF = np.iinfo(np.int64).max  # an empty WaitQueue slot's head

_first_fit_min = None  # the compiled queue first fit, imported on first use so the CLI starts fast


def _load_fit() -> Callable[[np.ndarray, np.ndarray, int, int], int]:
    global _first_fit_min
    from megha.schedulers.centralized._kernels import first_fit_min

    _first_fit_min = first_fit_min
    return first_fit_min


class SimResourceManager(ResourceManager):
    """:class:`ResourceManager` with its node managers in-process (simulator only, slot mode; needs
    ``port.set_timer_at``)."""

    def __init__(self, *args: Any, launch_delay: float = 0.0005, **kw: Any) -> None:
        """``launch_delay``: RM → node managers (the heartbeat's latency back is ``heartbeat_latency``)."""
        super().__init__(*args, **kw)
        if self.resource:
            raise ValueError(f"{self.address}: in-process node managers are for slot mode only")
        self.launch_delay = float(launch_delay)
        #: the node managers' own record (the container each node runs) and the over-commit check
        self.ledger = WorkerLedger(self.address, len(self.mask_of))
        self.on_node: list[int] = self.ledger.task  # the ledger's list, read and written on the hot paths
        self._due: dict[float, list] = {}  # tick -> [the node managers' timer instant, (task, node, end)...]
        self.nm_heartbeats = 0
        self.nm_ver: list[int] | None = None  # the node managers' state versions (faults; see ResourceManager.ver)
        self._heap = None
        self._next = None
        self._fifo_fast = False  # the common path of _nm_due is set up (on_start, in the simulator's engine)
        self._due_cb = self._nm_due  # the heartbeat timers' handler (one bound method for the run)

    def attach(self, port: Port) -> None:
        super().attach(port)
        self._heap, self._next = timer_queue_of(port)

    def on_start(self, now: float) -> None:
        super().on_start(now)
        self._fast_init()

    def _fast_init(self) -> None:
        """Per-node constants of the common path (:meth:`_nm_due`): complemented constraint masks, the node's word
        and bit in the idle vector, its heartbeat phase; the engine's count cells of the modelled messages."""
        idx = self.index
        self._inv_mask = [~m & 0xFFFFFFFF for m in self.mask_of]
        bits = idx.bit_of_worker.tolist()
        self._idle_word = [b >> 6 for b in bits]
        self._idle_bit = [np.uint64(1 << (b & 63)) for b in bits]
        port = self.port
        counter = getattr(port, "message_counter", None)
        self._n_hb = counter(NodeHeartbeat) if counter is not None else None
        self._n_launch = counter(Launch) if counter is not None else None
        self._fifo_fast = (
            self.queue_policy == "fifo"
            and self._heap is not None
            and self._n_hb is not None
            and type(self.rec) is TaskRecorder
        )
        if self._fifo_fast:  # the recorder's one-task logs, appended to directly (TaskRecorder.inline_logs)
            logs = self.rec.inline_logs()
            self._fin_i, self._fin_v = logs.finished_ids.append, logs.finished_times.append
            self._known_i, self._known_v = logs.known_ids.append, logs.known_times.append
            self._dec_i, self._dec_v = logs.decided_ids.append, logs.decided_times.append
            self._comm_i, self._comm_v = logs.comm_ids.append, logs.comm_delays.append
            self._st_i, self._st_v = logs.started_ids.append, logs.started_times.append
            self._st_w = logs.started_workers.append
        self._ph = self.schedule._ph
        self._period = self.schedule.period

    def on_timer(self, key: Hashable, now: float) -> None:
        if type(key) is float:  # a heartbeat timer held while the RM was down (see Engine.suspend)
            self._nm_due(key, now)
        elif key[0] == "nm":
            self._nm_due(key[1], now)
        else:
            super().on_timer(key, now)

    def _nm_due(self, tick: float, now: float) -> None:
        """The node managers' heartbeat of ``tick`` reaches the RM (the engine calls it directly).

        The common case — one container on one node, FIFO queue, no faults, nothing booked on the node, the
        simulator's recorder — runs inline: :meth:`_due_group`, :meth:`ResourceManager._fill`,
        :meth:`ResourceManager._pop`, :meth:`WaitQueue._take` of the head entry, :meth:`_flush` of the one launch and
        the recorder's one-task reports (:meth:`TaskRecorder.inline_logs`), the queue's first fit by the compiled
        kernel. The node ran the container, so the RM's view has it busy and its idle bit clear: a launch leaves the
        bit as it is, a node left without work gets it set."""
        g = self._due.pop(tick)
        if len(g) == 2 and self._fifo_fast and self.nm_ver is None and not self._guard:
            t, w, e = g[1]
            if w not in self.claims and not self._launch[0]:
                on_node = self.on_node
                on_node[w] = -1
                rec = self.rec
                self._fin_i(t)  # rec.finished_one(t, e)
                self._fin_v(e)
                rec.running -= 1
                rec.last_progress = e
                self.nm_heartbeats += 1
                self._n_hb[0] += 1
                stats = self.stats
                stats["heartbeats"] += 1
                self._known_i(t)  # rec.completion_known_one(t, now)
                self._known_v(now)
                rec.outstanding -= 1
                if not rec.outstanding & FLUSH_EVERY or rec.outstanding <= 0:
                    rec.known_done()
                busy = self.busy
                busy[w] = False
                if self._queued:
                    q = self.queues[0]
                    s = (
                        (_first_fit_min or _load_fit())(q._masks, q._heads, q._n_slots, self._inv_mask[w])
                        if q._len
                        else -1
                    )
                    if s >= 0:
                        b = q._buckets[s]  # q._take(s) of the head entry
                        entry = b.popleft()[1]
                        q._len -= 1
                        if b:
                            q._heads[s] = b[0][0]
                        else:
                            q._heads[s] = _INF
                            q._empty_slots += 1
                            if q._empty_slots > 64 and q._empty_slots * 2 > q._n_slots:
                                q._compact()
                        self._queued -= 1
                        stats["allocated_from_queue"] += 1
                        busy[w] = True
                        t = entry[0]  # the launch: _flush of one task (the node is empty: no over-commit)
                        self._dec_i(t)  # rec.decided_one(t, now)
                        self._dec_v(now)
                        d = self.launch_delay
                        self._n_launch[0] += 1
                        t1 = now + d  # when the node managers get the launch
                        on_node[w] = t
                        self._comm_i(t)  # rec.launched_one(t, d, t1, w)
                        self._comm_v(d)
                        self._st_i(t)
                        self._st_v(t1)
                        self._st_w(w)
                        rec.running += 1
                        rec.last_progress = t1
                        e = t1 + entry[1]
                        tick = e + (self._ph[w] - e) % self._period  # HeartbeatSchedule.next_tick
                        g = self._due.get(tick)
                        if g is None:
                            fire = t1 + (tick - t1)  # the instant the node managers' timer would fire
                            self._due[tick] = [fire, (t, w, e)]
                            heappush(self._heap, (fire + self.hb_latency, self._next(), self._due_cb, tick))
                        else:
                            g.append((t, w, e))
                        return
                self.idle[self._idle_word[w]] |= self._idle_bit[w]
                return
        self._due_group(g, now)

    def _due_group(self, g: list, now: float) -> None:
        items = g[1:]
        on_node = self.on_node
        rec = self.rec
        if len(items) == 1:  # one container on one node: ResourceManager._heartbeat inlined
            t, w, e = items[0]
            on_node[w] = -1
            ts = [t]
            rec.finished(ts, e)
            self.nm_heartbeats += 1
            self.port.count_message(NodeHeartbeat)
            self.stats["heartbeats"] += 1
            rec.completion_known(ts, now)
            self.busy[w] = False
            if self.queue_policy == "fair":
                self.running_by_user[self.user_of.pop(t)] -= 1
            if self.claims:
                self._launch_claims(w)
            self._fill(w)
            self._flush(now)
            return
        else:
            if not items:  # every container due at this tick died with its node
                return
            items.sort(key=lambda x: x[2])
            for _, w, _ in items:
                on_node[w] = -1
            tasks = [x[0] for x in items]
            t_nodes = [x[1] for x in items]
            ends = [x[2] for x in items]
            lo = 0
            for i in range(1, len(items) + 1):  # record ends at their true times
                if i == len(items) or ends[i] != ends[lo]:
                    rec.finished(tasks[lo:i], ends[lo])
                    lo = i
            uniq = sorted(set(t_nodes))
            self.nm_heartbeats += len(uniq)
            msg = NodeHeartbeat(uniq, tasks, t_nodes, None)
        self.port.count_message(NodeHeartbeat)
        self._heartbeat(msg, now)
        self._flush(now)

    def _flush(self, now: float) -> None:
        lt, lw, ld, _ = self._launch
        if not lt:
            return
        self._launch = ([], [], [], [])
        rec = self.rec
        port = self.port
        if self.nm_ver is not None:  # nodes have failed: launches to a dead or newer node do not start
            lt, lw, ld = self._refuse(lt, lw, ld, now)
            if not lt:
                return
        rec.decided(lt, now)
        d = self.launch_delay
        rec.add_comm(lt, d)
        port.count_message(Launch)
        t1 = now + d  # when the node managers get the launch
        on_node = self.on_node  # the ledger's list: its claim, inline
        for t, w in zip(lt, lw, strict=True):
            if on_node[w] >= 0:
                self.ledger.over_slot(w, t, t1)
            on_node[w] = t
        rec.started(lt, t1, lw)
        due = self._due
        next_tick = self.schedule.next_tick
        back = self.hb_latency
        heap = self._heap
        if heap is None:  # not in the simulator's engine (tests with a recording port)
            at = port.set_timer_at
        else:
            nxt = self._next
            due_cb = self._due_cb
        for t, w, dur in zip(lt, lw, ld, strict=True):
            e = t1 + dur
            tick = next_tick(w, e)
            g = due.get(tick)
            if g is None:
                fire = t1 + (tick - t1)  # the instant the node managers' timer would fire
                due[tick] = [fire, (t, w, e)]
                if heap is None:
                    at(fire + back, ("nm", tick))  # the instant their heartbeat would reach the RM
                else:
                    heapq.heappush(heap, (fire + back, nxt(), due_cb, tick))
            else:
                g.append((t, w, e))

    # --- faults: the in-process node managers' side (see megha.schedulers.centralized.faults) ---------------------
    def fail_nodes(self, nodes: list[int], now: float) -> NodesLost:
        """Nodes die at ``now``: their containers are lost (runs recorded lost; launches not yet arrived withdrawn).
        Returns what the RM's liveness monitor reports to the RM."""
        if self.nm_ver is None:
            self.nm_ver = [1] * len(self.mask_of)
        ver = self.nm_ver
        dead = [w for w in dict.fromkeys(nodes) if ver[w] & 1]
        for w in dead:
            ver[w] += 1
        gone = set(dead)
        hit = []
        for g in self._due.values():
            if any(x[1] in gone for x in g[1:]):
                keep = [x for x in g[1:] if x[1] not in gone]
                hit.extend(x[0] for x in g[1:] if x[1] in gone)
                g[1:] = keep
        lost = []
        if hit:
            on_node = self.on_node
            start = self.rec.start[hit]
            early = [t for t, s in zip(hit, start.tolist(), strict=True) if s > now]  # still on their way
            ran = [t for t, s in zip(hit, start.tolist(), strict=True) if not s > now]
            if early:
                self.rec.withdraw_start(early)
            if ran:
                self.rec.lost(ran, now)
            for w in dead:
                lost.extend((t, w, None) for t in [on_node[w]] if t >= 0)
                on_node[w] = -1
        return NodesLost(dead, [ver[w] for w in dead], lost)

    def restore_nodes(self, nodes: list[int], now: float) -> NodesRegistered:
        """Dead nodes come back empty; returns their registration for the RM."""
        ver = self.nm_ver
        back = [] if ver is None else [w for w in dict.fromkeys(nodes) if not ver[w] & 1]
        for w in back:
            ver[w] += 1
        return NodesRegistered(back, [ver[w] for w in back], [], [])

    def _refuse(self, lt: list, lw: list, ld: list, now: float) -> tuple[list, list, list]:
        """Launches to a node the RM's view is out of date on (dead, or back in a newer incarnation) do not start;
        their tasks are asked for again (the RM writes the node off when it learns of the failure)."""
        nmv = self.nm_ver
        ver = self._versions()
        bad = [i for i, w in enumerate(lw) if nmv[w] != ver[w] or not nmv[w] & 1]
        if not bad:
            return lt, lw, ld
        self.stats["launches_failed"] = self.stats.get("launches_failed", 0) + len(bad)
        refused = [lt[i] for i in bad]
        ok = [i for i, w in enumerate(lw) if nmv[w] == ver[w] and nmv[w] & 1]
        lt, lw, ld = [lt[i] for i in ok], [lw[i] for i in ok], [ld[i] for i in ok]
        self._requeue_lost(refused, None, now)  # booked for a heartbeat or queued: nothing is added to this flush
        return lt, lw, ld

    def _accept(self, nodes: list[int]) -> None:
        """In-process node managers need no acceptance: a launch checks the node's version when it is committed."""

    def _resync(self, now: float) -> None:
        """After a restart: the view rebuilt at once from the in-process node managers (their re-registration)."""
        self.syncing = 0
        nmv = self.nm_ver
        if nmv is not None:
            self.ver = list(nmv)
        alive = []
        busy = self.busy
        for w, t in enumerate(self.on_node):
            if nmv is None or nmv[w] & 1:
                self.down.discard(w)
                busy[w] = t >= 0
                alive.append(w)
            else:
                self.down.add(w)
        self._set_guard()
        self._refill(alive)

    def running(self) -> int:
        """Containers running on the nodes."""
        return self.ledger.busy()
