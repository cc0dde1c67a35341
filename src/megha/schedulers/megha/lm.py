"""The Local Master: owns one cluster, validates GMs' mappings against its true state, launches tasks.

* A batch of mappings from a GM is validated one by one; a mapping to a worker that is no longer free is
  an *inconsistency* and is rejected. The reply (one per batch) carries the rejected tasks and the LM's
  pending delta for that GM: the workers changed by *other* GMs since that GM's last update, as truth.
* Changes caused by a GM's own tasks are not put in its delta: it books its launches itself and learns of
  its completions through :class:`TaskDone` (the IoT 2023 paper's enhancement against double booking).
* Every ``heartbeat`` seconds each GM with pending changes gets a :class:`StateDelta`.
* Resource mode: a task launched in another GM's partition of a node carves a logical node of exactly the
  task's request into that GM's partition (repartition at resource granularity).
* Fairness: a preemption request is verified against the LM's true state — the victim must stay at or above
  its share after losing the preempted tasks (see :meth:`FairShare.victims`; its usage here is exact, its
  usage on other LMs is the requesting GM's latest view) and run tasks on a worker that suits the requester —
  then the victim's tasks are killed and the requester's task launched in their place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.schedulers.common.messages import Finished, Kill, Killed, Launch
from megha.schedulers.megha.fairness import FairShare
from megha.schedulers.megha.handoff import AgedQueue
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.messages import (
    Handoff,
    LaunchReply,
    LaunchRequest,
    Preempted,
    PreemptReply,
    PreemptRequest,
    StateDelta,
    StatePull,
    SyncRequest,
    TaskDone,
)
from megha.schedulers.megha.messages import (
    as_list as _as_list,
)
from megha.schedulers.megha.state import ResourceCluster, SlotCluster
from megha.sim.component import Component, Port


class LocalMaster(Component):
    """Megha LM ``l`` for the contiguous worker range ``layout.lm_lo[l]:layout.lm_hi[l]``."""

    kind = "lm"
    #: Hook: whether this LM delivers its heartbeat updates to the GMs' own handler (``on_message_delta``) when
    #: its port offers :meth:`SimHooks.route <megha.sim.component.SimHooks.route>` (the simulator's in-process
    #: LM, :class:`.simlm.SimLocalMaster`, does). The same events as the messages; off by default.
    direct_updates: bool = False
    # the port's direct deliveries (SimHooks.routes / route), when direct_updates
    _routes: dict | None = None
    _route: Callable | None = None

    def __init__(
        self,
        l: int,  # noqa: E741 - the papers' name
        layout: MeghaLayout,
        recorder: TaskRecorder,
        heartbeat: float = 5.0,
        fair: FairShare | None = None,
        reply_always: bool = False,
        *,
        phase: float | None = None,
    ) -> None:
        super().__init__(layout.lm_address(l))
        self.l = l
        self.layout = layout
        self.rec = recorder
        self.heartbeat = heartbeat
        self.fair = fair
        lo, hi = int(layout.lm_lo[l]), int(layout.lm_hi[l])
        self.lo, self.hi = lo, hi
        if layout.capacity is None:
            self.cluster: SlotCluster | ResourceCluster = SlotCluster(lo, hi - lo)
            self.total_units = float(hi - lo)
        else:
            self.cluster = ResourceCluster(lo, layout.capacity[lo:hi].copy())
            self.total_units = float(layout.capacity[lo:hi, 0].sum())
        self.resource_mode = layout.capacity is not None
        self.reply_always = reply_always
        self.G = layout.n_gms
        self.processed = [0] * layout.n_gms  # highest request id processed, per GM
        # change log: latest change of each worker (sequence number, GM whose task caused it), oldest first;
        # GM g has been told about every change up to sequence number _sent[g]
        self._changes: dict[int, tuple[int, int]] = {}
        self._seq = 0
        self._sent = [0] * self.G
        self.gm_addr = [layout.gm_address(g) for g in range(self.G)]
        self.pool = layout.pool_address(l)
        self._part = layout.part_of
        self._part_l = layout.part_of.tolist()
        self._masks = layout.worker_masks
        self.usage = np.zeros(fair.n_users) if fair is not None else None
        self.user_tasks: dict[int, dict[int, int]] = {}  # fairness: user -> {task: worker}
        self.kill_pending: dict[int, tuple] = {}  # task -> (owner gm, worker, demand)
        self._phase = 0.0
        self._aligned = phase  # heartbeat grid origin shared by every LM (None: staggered between LMs)
        self._armed = False
        self.counters: Counter = Counter()
        self._handlers = {
            LaunchRequest: self._on_request,
            Finished: self._on_finished,
            Killed: self._on_killed,
            SyncRequest: self._on_sync,
            PreemptRequest: self._on_preempt,
            StatePull: self._on_pull,
            Handoff: self._on_handoff,
        }
        self._waiting = AgedQueue()  # tasks handed over by GMs (starvation remedy), oldest job first
        self._handoff_seq = 0

    def on_start(self, now: float) -> None:
        # heartbeats fall on a fixed grid, staggered over one period between LMs; the timer is armed only
        # while there is something to report, so an idle LM costs no events
        if self._aligned is not None:
            self._phase = self._aligned
        else:
            self._phase = now + self.heartbeat * (self.l + 1) / max(self.layout.n_lms, 1)

    def _arm(self, now: float) -> None:
        h = self.heartbeat
        k = max(0.0, (now - self._phase) // h + 1)
        self.port.set_timer(self._phase + k * h - now, "heartbeat")
        self._armed = True

    def attach(self, port: Port) -> None:
        super().attach(port)
        if self.direct_updates:
            self._routes = getattr(port, "routes", None)
            self._route = getattr(port, "route", None)

    def on_message(self, msg: Any, now: float) -> None:
        h = self._handlers.get(type(msg))
        if h is None:
            raise TypeError(f"{self.address}: unexpected message {type(msg).__name__}")
        h(msg, now)

    # --- extension hooks (docs/extending.md): what the simulator's and the live runtime's LMs build on ---------
    def handle(self, cls: type, handler: Callable[[Any, float], None]) -> Callable[[Any, float], None] | None:
        """Make ``handler(msg, now)`` this LM's handler of messages of type ``cls`` and return the handler it
        replaces (None for a new type), which the new one may call to keep the LM's own behaviour. Call it from a
        subclass's ``__init__`` after ``super().__init__()``; :meth:`on_message` looks handlers up by exact type."""
        prev = self._handlers.get(cls)
        self._handlers[cls] = handler
        return prev

    def start_tasks(
        self, tasks: list[int], workers: list[int], durs: list[float], dem: np.ndarray | None, now: float
    ) -> None:
        """Hook: tasks this LM accepted start on its workers (lists of equal length; ``dem`` the demand rows in
        resource mode, else None). Called once per accepted launch request, on the hot path of every task.

        The default hands a :class:`Launch` to :meth:`to_workers`. The simulator's in-process LM starts them
        itself; an override must make each task end with a :class:`Finished` (or a call of the LM's own
        completion path) and must not change the LM's cluster state, which is already updated."""
        self.to_workers(Launch(tasks, workers, durs, self.address, dem), now)

    def to_workers(self, msg: Launch | Kill, now: float) -> None:
        """Hook: hand a launch or a kill to this LM's workers. The default sends it to the worker pool's address
        (the simulator's :class:`~megha.schedulers.common.workers.WorkerPool`); the live LM splits it by worker
        host. The workers answer with :class:`Finished` / :class:`Killed`, which reach :meth:`on_message`."""
        self.port.send(self.pool, msg)

    def place_task(self, w: int, task: int, demand: Any, gm: int, user: int, now: float) -> bool:
        """Put ``task`` of GM ``gm`` (and ``user``) on worker ``w`` in this LM's state, outside any GM's request (the
        live LM relaunching a dead host's task): False when it does not fit. Every GM, ``gm`` included, hears of the
        change in the next update. The caller then starts it (:meth:`start_tasks` or its own dispatch)."""
        if not self.cluster.try_place(w, task, demand, gm, user):
            return False
        if self.resource_mode and self._part[w] != gm:
            self.cluster.carve(w, task, gm, demand)
        if self.usage is not None:
            self.usage[user] += self._units(demand)
            self.user_tasks.setdefault(user, {})[task] = w
        self._changed(w, -1, now)
        return True

    def remove_task(self, w: int, task: int, demand: Any, now: float) -> tuple[int, int]:
        """Take ``task`` (on worker ``w``) off this LM's state without a report from its worker (the live LM
        losing a dead host's runs); returns the task's ``(gm, user)``. Every GM, the owner included, hears of the
        change in the next update."""
        gm, user = self.cluster.remove(w, task, demand)
        if self.usage is not None:
            self.usage[user] -= self._units(demand)
            self.user_tasks.get(user, {}).pop(task, None)
        self._changed(w, -1, now)
        return gm, user

    def worker_changed(self, w: int, now: float) -> None:
        """Worker ``w``'s state changed outside the LM's own steps (a subclass marked it down or up in
        :attr:`cluster`): every GM hears of it in the next update."""
        self._changed(w, -1, now)

    # --- bookkeeping helpers -----------------------------------------------------------------------------
    def _changed(self, w: int, by_gm: int, now: float) -> None:
        """Worker ``w`` changed because of GM ``by_gm``'s task: every other GM must hear of it.

        Only the latest change of a worker matters: a change by a GM's own task supersedes earlier ones for
        that GM (it books its launches itself and learns of its completions through TaskDone).
        """
        if not self._armed:
            self._arm(now)
        self._seq += 1
        ch = self._changes
        ch.pop(w, None)
        ch[w] = (self._seq, by_gm)

    def pending_for(self, gm: int) -> list[int]:
        """Workers changed by other GMs since ``gm``'s last update, oldest first."""
        sent = self._sent[gm]
        out = []
        for w, (seq, by) in reversed(self._changes.items()):
            if seq <= sent:
                break
            if by != gm:
                out.append(w)
        out.reverse()
        return out

    def _units(self, demand) -> float:
        return float(demand[0]) if self.resource_mode else 1.0

    def _freed_units(self, w: int, tasks: list[int]) -> float:
        """Units that preempting ``tasks`` on worker ``w`` takes from their user."""
        if not self.resource_mode:
            return float(len(tasks))
        on = self.cluster.tasks_on[w - self.lo]
        return float(sum(on[t][2][0] for t in tasks))

    def _delta_for(self, gm: int, extra: list[int] | None = None) -> tuple[list[int], list | np.ndarray]:
        workers = self.pending_for(gm)
        if extra:
            seen = set(workers)
            workers.extend(w for w in extra if w not in seen)
        self._sent[gm] = self._seq
        return workers, self.cluster.truth(workers)

    def _usage_copy(self) -> np.ndarray | None:
        return None if self.usage is None else self.usage.copy()

    # --- handlers ------------------------------------------------------------------------------------------
    def _on_request(self, msg: LaunchRequest, now: float) -> None:
        gm = msg.gm
        cluster = self.cluster
        tasks = msg.tasks
        workers = msg.workers
        users = msg.users
        if type(tasks) is not list or type(workers) is not list or type(users) is not list:
            tasks, workers, users = _as_list(tasks), _as_list(workers), _as_list(users)
        dem = msg.demands
        acc: list[int] = []
        rej_t: list[int] = []
        rej_w: list[int] = []
        part = self._part_l
        repart = 0
        if type(cluster) is SlotCluster and self.usage is None:
            # slot mode without fairness, inlined: SlotCluster.try_place and _changed per mapping
            ctask, cowner, cuser, lo = cluster.task, cluster.owner, cluster.user, cluster.lo
            ch = self._changes
            seq = self._seq
            for i, t in enumerate(tasks):
                w = workers[i]
                j = w - lo
                if ctask[j] < 0:
                    ctask[j] = t
                    cowner[j] = gm
                    cuser[j] = users[i]
                    acc.append(i)
                    if part[w] != gm:
                        repart += 1
                    seq += 1
                    ch.pop(w, None)
                    ch[w] = (seq, gm)
                else:
                    rej_t.append(t)
                    rej_w.append(w)
            if seq != self._seq:
                self._seq = seq
                if not self._armed:
                    self._arm(now)
        else:
            for i, t in enumerate(tasks):
                w = workers[i]
                d = None if dem is None else dem[i]
                if cluster.try_place(w, t, d, gm, users[i]):
                    acc.append(i)
                    if part[w] != gm:
                        repart += 1
                        if self.resource_mode:
                            cluster.carve(w, t, gm, d)
                    self._changed(w, gm, now)
                    if self.usage is not None:
                        self.usage[users[i]] += self._units(d)
                        self.user_tasks.setdefault(users[i], {})[t] = w
                else:
                    rej_t.append(t)
                    rej_w.append(w)
        if repart:
            self.counters["repartitions"] += repart
        if acc:
            durs = msg.durations
            if type(durs) is not list:
                durs = _as_list(durs)
            if len(acc) == len(tasks):
                lt, lw, ld, ldem = tasks, workers, durs, dem
            else:
                lt = [tasks[i] for i in acc]
                lw = [workers[i] for i in acc]
                ld = [durs[i] for i in acc]
                ldem = None if dem is None else dem[np.array(acc, dtype=np.int64)]
            self.start_tasks(lt, lw, ld, ldem, now)
        self.processed[gm] = msg.req
        if rej_t:
            self.counters["inconsistencies"] += len(rej_t)
        if rej_t or self.reply_always:
            dw, ds = self._delta_for(gm, rej_w)
            self.port.send(
                self.gm_addr[gm],
                LaunchReply(self.l, msg.req, rej_t, dw, ds, self._usage_copy(), msg.req),
            )

    def _on_finished(self, msg: Finished, now: float) -> None:
        self._finished(_as_list(msg.tasks), _as_list(msg.workers), msg.demands, now)

    def _finished(self, tasks: list[int], workers: list[int], dem: np.ndarray | None, now: float) -> None:
        """Tasks ended on their workers: free them and tell each owner GM (TaskDone)."""
        cluster = self.cluster
        by_gm: dict[int, list[int]] = {}
        kill_pending = self.kill_pending
        usage = self.usage
        if type(cluster) is SlotCluster and usage is None and not kill_pending:
            # slot mode without fairness, inlined: SlotCluster.remove and _changed per task
            ctask, cowner, cuser, lo = cluster.task, cluster.owner, cluster.user, cluster.lo
            ch = self._changes
            if tasks and not self._armed:
                self._arm(now)
            seq = self._seq
            for i in range(len(tasks)):
                w = workers[i]
                j = w - lo
                gm = cowner[j]
                ctask[j] = cowner[j] = cuser[j] = -1
                seq += 1
                ch.pop(w, None)
                ch[w] = (seq, gm)
                lst = by_gm.get(gm)
                if lst is None:
                    by_gm[gm] = [i]
                else:
                    lst.append(i)
            self._seq = seq
        else:
            for i, t in enumerate(tasks):
                w = workers[i]
                d = None if dem is None else dem[i]
                kp = kill_pending.pop(t, None) if kill_pending else None
                if kp is not None:  # finished before the kill reached the worker: a normal completion
                    gm = kp[0]
                else:
                    gm, user = cluster.remove(w, t, d)
                    self._changed(w, gm, now)
                    if usage is not None:
                        usage[user] -= self._units(d)
                        self.user_tasks.get(user, {}).pop(t, None)
                lst = by_gm.get(gm)
                if lst is None:
                    by_gm[gm] = [i]
                else:
                    lst.append(i)
        reused = self._serve_waiting(workers, now) if self._waiting else None
        for gm, idx in by_gm.items():
            if reused:
                rw = [workers[i] for i in idx if workers[i] in reused]
                if rw:
                    self.port.send(
                        self.gm_addr[gm],
                        TaskDone(
                            self.l,
                            [tasks[i] for i in idx],
                            [workers[i] for i in idx],
                            None,
                            self.processed[gm],
                            rw,
                        ),
                    )
                    continue
            if len(idx) == len(tasks):
                self.port.send(self.gm_addr[gm], TaskDone(self.l, tasks, workers, dem, self.processed[gm]))
            else:
                self.port.send(
                    self.gm_addr[gm],
                    TaskDone(
                        self.l,
                        [tasks[i] for i in idx],
                        [workers[i] for i in idx],
                        None if dem is None else dem[np.array(idx, dtype=np.int64)],
                        self.processed[gm],
                    ),
                )

    # --- starvation remedy: tasks handed over by GMs (see .handoff) ----------------------------------------------
    def _on_handoff(self, msg: Handoff, now: float) -> None:
        if self.resource_mode or self.usage is not None:
            raise TypeError(f"{self.address}: handed-over tasks need slot mode without fairness")
        masks = self._masks
        lo, hi = self.lo, self.hi
        started: list[tuple] = []
        for i, t in enumerate(_as_list(msg.tasks)):
            m = int(msg.masks[i])
            e = (t, msg.durations[i], m, msg.users[i], msg.gm)
            busy = np.array(self.cluster.task) >= 0
            free = np.flatnonzero(~busy & ((masks[lo:hi] & np.uint32(m)) == m))
            if free.size:  # a suitable worker is free here right now
                self._start_handed(e, lo + int(free[0]), now, started)
            else:
                self._handoff_seq += 1
                self._waiting.push(round(msg.arrivals[i] * 1e6), self._handoff_seq, e, m)
        self._launch_handed(started, now)

    def _start_handed(self, e: tuple, w: int, now: float, started: list) -> None:
        t, dur, _, user, gm = e
        self.cluster.try_place(w, t, None, gm, user)
        if self._part_l[w] != gm:
            self.counters["repartitions"] += 1
        self._changed(w, -1, now)  # every GM, the task's own included, learns the worker is busy
        self.counters["handoff_launches"] += 1
        started.append((t, w, dur))

    def _launch_handed(self, started: list, now: float) -> None:
        if started:
            ts = [x[0] for x in started]
            self.rec.decided(ts, now)
            self.start_tasks(ts, [x[1] for x in started], [x[2] for x in started], None, now)

    def _serve_waiting(self, workers: list[int], now: float) -> set[int]:
        """Freed workers go to the oldest handed-over tasks they suit; returns the workers so reused."""
        reused: set[int] = set()
        started: list[tuple] = []
        masks = self._masks
        for w in workers:
            if not self._waiting:
                break
            e = self._waiting.pop_fitting(int(masks[w]))
            if e is not None:
                self._start_handed(e, w, now, started)
                reused.add(w)
        self._launch_handed(started, now)
        return reused

    def on_timer(self, key: Hashable, now: float) -> None:
        self._armed = False
        seq = self._seq
        sent = self._sent
        low = min(sent)
        routes = self._routes if self.usage is None else None
        slot = type(self.cluster) is SlotCluster
        ctask = self.cluster.task if slot else None
        lo = self.lo
        if routes is not None and slot and low < seq and max(sent) == low:
            # every GM was last told the same changes (the usual case in the simulator): one list of the changed
            # workers, their truths and who changed them, shared by every GM's delivery (on_message_delta skips
            # its own changes), instead of a list per GM
            ws: list[int] = []
            bys: list[int] = []
            for w, (s, by) in reversed(self._changes.items()):  # the changes since, newest first
                if s <= low:
                    break
                ws.append(w)
                bys.append(by)
            ws.reverse()
            bys.reverse()
            state = [ctask[w - lo] < 0 for w in ws]  # SlotCluster.truth, inlined
            byset = set(bys)
            n_sent = 0
            for g in range(self.G):
                sent[g] = seq
                mine = g in byset
                if mine and len(byset) == 1:
                    continue  # only this GM's own changes: nothing to tell it
                n_sent += 1
                r = routes.get(self._delta_keys[g])
                if r is None:
                    r = self._route(self.gm_addr[g], "on_message_delta", StateDelta)
                if r:  # the same event as the StateDelta, a tuple instead (see SimPort.route)
                    append, handler, d, nxt, cell, _ = r
                    cell[0] += 1
                    append((now + d, nxt(), handler, (self.l, ws, state, bys if mine else None, self.processed[g])))
                else:
                    workers = [w for i, w in enumerate(ws) if bys[i] != g]
                    delta = StateDelta(self.l, workers, self.cluster.truth(workers), False, None, self.processed[g])
                    self.port.send(self.gm_addr[g], delta)
            if n_sent:
                self.counters["updates_sent"] += n_sent
            return
        # the changes not yet sent to some GM, oldest first, collected once for all GMs (pending_for of each)
        new: list = []
        if low < seq:
            for item in reversed(self._changes.items()):
                if item[1][0] <= low:
                    break
                new.append(item)
            new.reverse()
        for g in range(self.G):
            since = sent[g]
            if since >= seq:
                workers = []
            elif since == low:
                workers = [w for w, (_, by) in new if by != g]
            else:
                workers = [w for w, (s, by) in new if s > since and by != g]
            sent[g] = seq
            if workers:
                self.counters["updates_sent"] += 1
                if routes is not None:
                    r = routes.get(self._delta_keys[g])
                    if r is None:
                        r = self._route(self.gm_addr[g], "on_message_delta", StateDelta)
                    if r:  # in the simulator: the same event, a tuple instead of a StateDelta (see SimPort.route)
                        append, handler, d, nxt, cell, _ = r
                        cell[0] += 1
                        # SlotCluster.truth, inlined
                        state = [ctask[w - lo] < 0 for w in workers] if slot else self.cluster.truth(workers)
                        append((now + d, nxt(), handler, (self.l, workers, state, None, self.processed[g])))
                        continue
                delta = StateDelta(
                    self.l, workers, self.cluster.truth(workers), False, self._usage_copy(), self.processed[g]
                )
                self.port.send(self.gm_addr[g], delta)
            elif self.usage is not None:
                self.port.send(
                    self.gm_addr[g],
                    StateDelta(self.l, [], self.cluster.truth([]), False, self._usage_copy(), self.processed[g]),
                )
                self.counters["updates_sent"] += 1

    def _on_pull(self, msg: StatePull, now: float) -> None:
        """A GM pulls this LM's state (the 2020 simulator after completions and rejections)."""
        dw, ds = self._delta_for(msg.gm)
        self.port.send(
            self.gm_addr[msg.gm],
            StateDelta(self.l, dw, ds, False, self._usage_copy(), self.processed[msg.gm], msg.pull),
        )

    def _on_sync(self, msg: SyncRequest, now: float) -> None:
        workers = list(range(self.lo, self.hi))
        self._sent[msg.gm] = self._seq
        self.counters["snapshots_sent"] += 1
        self.port.send(
            self.gm_addr[msg.gm],
            StateDelta(self.l, workers, self.cluster.truth(workers), True, self._usage_copy(), self.processed[msg.gm]),
        )

    # --- fairness: verified preemption ----------------------------------------------------------------------
    def _on_preempt(self, msg: PreemptRequest, now: float) -> None:
        self.counters["preemption_requests"] += 1
        chosen = None
        running = None
        fair = self.fair
        if fair is not None and self.usage is not None:
            # what the victim may lose and still hold its share: its exact usage here plus, when the GM says, its
            # usage on the other LMs as the GM last saw it (LMs do not talk to each other), against its share of
            # the datacenter; else its share of this cluster
            if msg.victim_elsewhere is None:
                surplus = self.usage[msg.victim] - fair.shares[msg.victim] * self.total_units + 1e-9
            else:
                surplus = self.usage[msg.victim] + msg.victim_elsewhere - fair.shares[msg.victim] * fair.total + 1e-9
            running = self.user_tasks.get(msg.victim, {}) if surplus > 2e-9 else None
            if running:
                ws = np.unique(np.fromiter(running.values(), dtype=np.int64, count=len(running)))
                wm = self._masks[ws]
                for k, mask in enumerate(msg.masks.tolist()):
                    demand = None if msg.demands is None else msg.demands[k]
                    for w in ws[(np.uint32(mask) & ~wm) == 0].tolist():  # task ⊆ worker
                        victims = self.cluster.victims_on(w, msg.victim, demand)
                        if victims and self._freed_units(w, victims) <= surplus:
                            chosen = (k, w, victims, demand)
                            break
                    if chosen is not None:
                        break
        first = int(msg.tasks[0])
        if chosen is None:
            self.counters["preemptions_refused"] += 1
            dw, ds = self._delta_for(msg.gm)
            # what this LM could free for the victim: the GM picks candidates these workers suit next time
            masks = np.unique(self._masks[ws]).astype(np.uint32) if running else None
            self.port.send(
                self.gm_addr[msg.gm],
                PreemptReply(
                    self.l, first, False, -1, dw, ds, self._usage_copy(), self.processed[msg.gm], victim_masks=masks
                ),
            )
            return
        k, w, victims, demand = chosen
        task = int(msg.tasks[k])
        for t in victims:
            d = self.cluster.tasks_on[w - self.lo][t][2] if self.resource_mode else None
            owner, user = self.cluster.remove(w, t, d)
            self.kill_pending[t] = (owner, w, d)
            self.usage[user] -= self._units(d)
            self.user_tasks.get(user, {}).pop(t, None)
        self.counters["preemptions"] += len(victims)
        self.to_workers(Kill(np.array(victims, dtype=np.int64), self.address), now)
        placed = self.cluster.try_place(w, task, demand, msg.gm, msg.user)
        assert placed, "preemption freed too little"
        if self._part[w] != msg.gm:
            self.counters["repartitions"] += 1
            if self.resource_mode:
                self.cluster.carve(w, task, msg.gm, demand)
        self._changed(w, msg.gm, now)
        self.usage[msg.user] += self._units(demand)
        self.user_tasks.setdefault(msg.user, {})[task] = w
        dem = None if demand is None else np.asarray(demand, dtype=np.float64)[None, :]
        self.to_workers(
            Launch(
                np.array([task], dtype=np.int64),
                np.array([w], dtype=np.int64),
                np.array([msg.durations[k]]),
                self.address,
                dem,
            ),
            now,
        )
        dw, ds = self._delta_for(msg.gm)
        self.port.send(
            self.gm_addr[msg.gm],
            PreemptReply(self.l, first, True, task, dw, ds, self._usage_copy(), self.processed[msg.gm], w),
        )

    def _on_killed(self, msg: Killed, now: float) -> None:
        by_gm: dict[int, list[int]] = {}
        for t in _as_list(msg.tasks):
            kp = self.kill_pending.pop(t, None)
            if kp is not None:
                by_gm.setdefault(kp[0], []).append(t)
        for gm, ts in by_gm.items():
            self.port.send(self.gm_addr[gm], Preempted(self.l, np.array(ts, dtype=np.int64), self.processed[gm]))
