"""The Global Master: places tasks on its eventually consistent global view; LMs validate.

Per task (Megha paper §IV-B, IoT 2023 §4.3): AND the task's constraint vectors with the view's
availability, look at the GM's internal partitions first (round robin over LMs), then at external ones
(a *repartition*, round robin over LMs), choose a worker by policy (random or min-constraints) and book it
in the view at once; requests to the same LM are batched. No match → the task waits in the GM's queue.
When a worker becomes free in the view — the GM's own task completed, or an LM update says so — it goes to
the first queued task that fits (work conserving). A rejected mapping (an *inconsistency*) is retried at
once against the refreshed view, or goes back to the head of the queue.

With fairness (Algorithm 2) the GM serves per-user queues round robin and, under contention, asks an LM to
preempt tasks of the user with the largest share violation.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from megha.metrics.recorder import FLUSH_EVERY, TaskRecorder
from megha.model.matching import FastRandom, Policy
from megha.schedulers.common.messages import JobArrival
from megha.schedulers.megha import fairness as _fairness
from megha.schedulers.megha.fairness import (
    E_DEMAND,
    E_DUR,
    E_MASK,
    E_TASK,
    E_USER,
    FairQueues,
    FairShare,
    SingleQueue,
    first_fit_kernel,
)
from megha.schedulers.megha.jobqueue import FewestTasksQueue
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
from megha.schedulers.megha.state import _EPS, ResourceView, SlotView
from megha.sim.component import Component, Port

_INF = np.iinfo(np.int64).max


def _no_flush(now: float) -> None:
    """The GM's ``_flush`` inside :meth:`GlobalMaster.hold_launches`."""


class GlobalMaster(Component):
    """Megha GM ``g``: a sans-I/O state machine (messages and timers in, messages out)."""

    kind = "gm"

    def __init__(
        self,
        g: int,
        layout: MeghaLayout,
        recorder: TaskRecorder,
        policy: Policy = Policy.RANDOM,
        batch_size: int = 100,
        repartition: bool = True,
        fair: FairShare | None = None,
        job_user: np.ndarray | None = None,
        preemption: bool = True,
        fresh_view: bool = True,
        preempt_candidates: int = 16,
        fair_period: float = 5.0,
        *,
        queue: str = "fifo",
        partition_order: str = "round-robin",
        reject: str = "retry",
        matching: str = "offer",
        full_pull: bool = False,
        handoff_after: float | None = None,
        handoff_rare: int = 100,
        pull_overwrites: float | None = None,
    ) -> None:
        super().__init__(layout.gm_address(g))
        self.g = g
        self.layout = layout
        self.rec = recorder
        self.policy = Policy(policy)
        self.batch_size = batch_size
        self.repartition = repartition
        self.fair = fair
        self.job_user = job_user
        self.preemption = preemption and fair is not None
        self.preempt_candidates = preempt_candidates
        self.fair_period = fair_period
        self._fair_backoff = fair_period
        self._fair_armed = False
        self._fair_not_before = 0.0  # after preemption was refused everywhere, LM updates retry no sooner than this
        idx = layout.idx
        if layout.capacity is None:
            self.view: SlotView | ResourceView = SlotView(idx, layout.n_workers, all_free=fresh_view)
        else:
            self.view = ResourceView(idx, layout.capacity, all_free=fresh_view)
        self.resource_mode = layout.capacity is not None
        if fair is not None:
            if queue != "fifo" or matching != "offer":
                raise ValueError("fairness shares need queue=fifo and matching=offer (one FIFO per user)")
            users = [u for u in range(fair.n_users) if int(fair.user_gm[u]) == g]
            self.queue: SingleQueue | FairQueues | FewestTasksQueue = FairQueues(users, fair)
            self.lm_usage = np.zeros((layout.n_lms, fair.n_users))
            self.own_usage = np.zeros(fair.n_users)
            self.my_users = users
        elif queue == "fewest-tasks":
            self.queue = FewestTasksQueue()
        elif queue == "fewest-remaining":  # the 2020 simulator's job order (megha20 profile)
            from megha.schedulers.megha.remaining import FewestRemainingQueue

            self.queue = FewestRemainingQueue()
        elif queue == "fifo":
            self.queue = SingleQueue()
        else:
            raise ValueError(f"unknown queue discipline {queue!r}")
        if partition_order not in ("round-robin", "first", "random") or reject not in ("retry", "head"):
            raise ValueError(f"bad partition_order {partition_order!r} or reject {reject!r}")
        self.queue_kind = queue
        self.partition_order = partition_order
        self.reject = reject
        self.matching = matching
        self.scan = matching == "scan"
        self.full_pull = full_pull
        self._single = type(self.queue) is SingleQueue
        # pull_overwrites (megha20 profile): the GM->LM delay; bookings younger than it are not verified yet
        if pull_overwrites is not None and (self.resource_mode or not self.scan or not full_pull):
            raise ValueError("pull_overwrites needs slot mode, matching=scan and full_pull")
        self.pull_overwrites = pull_overwrites
        self._ow_defer = pull_overwrites is not None  # _flush waits for the end of the instant (see _ow_send)
        self._ow_armed = False
        self._ow_log: deque = deque()  # (send time, workers) of the launch requests sent
        self._ow_rounds: dict[int, int] = {}  # pull id -> updates it stands for (tasks completed or rejected)
        self._ow_beat = -1.0  # instant of the last heartbeat update
        self._ow_pull_at = -1.0  # instant of the last pull
        G, L = layout.n_gms, layout.n_lms
        self._int_first = layout.int_orders[g][0]  # internal partitions in LM order (LM 0 first)
        # external partitions LM-major, then in GM order (the IoT 2023 reference's batched_repartition)
        self._ext_first = np.array([lm * G + k for lm in range(L) for k in range(G) if k != g], dtype=np.int64)
        self._pull_seq = 0
        self._pulls: dict[int, int] = {}  # pull id -> LM answers still to come
        # starvation remedy (see .handoff): tasks queued this long go to an LM
        if handoff_after is not None and (self.resource_mode or fair is not None or not self._single or self.scan):
            raise ValueError("handoff_after needs slot mode, no fairness, queue=fifo and matching=offer")
        self.handoff_after = handoff_after
        self.handoff_rare = handoff_rare
        self._arrived: dict[int, float] = {}  # task -> its job's arrival (only with handoff_after)
        self._handoff_armed = False
        self._lm_for: dict[int, tuple[int, int]] = {}  # mask -> (workers that suit it, LM with the most)
        # slot-mode drains (_queued_mask_fit): the kernel, loaded on first use, and its output buffers
        self._mask_fit: Any = None
        self._fit_masks = np.zeros(0, dtype=np.int64)
        self._fit_flags = np.zeros(0, dtype=np.bool_)
        # handoff: per wait-queue slot, whether its mask is rare (valid for the slot array it was computed on)
        self._rare_masks_of: np.ndarray | None = None
        self._rare_flags = np.zeros(0, dtype=bool)
        self._rare_known = 0
        self.fresh_view = fresh_view
        self._int = layout.int_orders[g]
        self._ext = layout.ext_orders[g]
        self.rr_int = g % layout.n_lms
        self.rr_ext = g % layout.n_lms
        self._masks = layout.worker_masks
        self._inv_masks = (~layout.worker_masks).tolist()  # complements as ints, for the first-fit kernel
        self._lm_of = layout.lm_of.tolist()
        self._G = layout.n_gms
        self._lm_addr = [layout.lm_address(lm) for lm in range(layout.n_lms)]
        self._launch_keys = [(a, "on_message_launch") for a in self._lm_addr]  # SimPort.route's cache keys
        # slot mode, round-robin partitions: placement scans one partition at a time (compiled, loaded here)
        self._seg_scan = not self.resource_mode and partition_order == "round-robin"
        self._pick_random = None
        if self._seg_scan:
            from megha.schedulers.megha._kernels import first_segment_pick, first_segment_with

            self._first_seg = first_segment_with
            self._seg_lo = layout.idx.seg_word_start.tolist()
            if self.policy is Policy.RANDOM:
                self._pick_random = first_segment_pick
                self._worker_at_bit = layout.idx.worker_at_bit.tolist()
        self._batch: list[list] = [[] for _ in range(layout.n_lms)]
        # a subclass's admit hook: every booking goes through it (and the inlined bookings are off)
        self._admits = type(self).admit is not GlobalMaster.admit
        if self._admits:
            self._book = self._book_admitted
        self._book_inline = not self._admits
        self._dirty: list[int] = []
        self.req_seq = 0
        self.unacked: dict[int, tuple] = {}  # request id -> (lm, workers, demands, entries, rejected ids)
        self.unacked_by_lm: list[deque] = [deque() for _ in range(layout.n_lms)]
        self.running: dict[int, tuple] = {}  # own running tasks -> entry (fairness: usage and requeue)
        self.preempting: dict[int, tuple] = {}  # task -> (entry, victims left, LMs left for this victim)
        # (victim, LM) -> constraint masks of the workers the victim held there at the last refusal
        self._victim_masks: dict[tuple[int, int], np.ndarray] = {}
        self.counters: Counter = Counter()
        self.rnd = FastRandom(np.random.default_rng(0))
        self._handlers = {
            JobArrival: self._on_job,
            LaunchReply: self._on_reply,
            TaskDone: self._on_done,
            StateDelta: self._on_delta,
            PreemptReply: self._on_preempt_reply,
            Preempted: self._on_preempted,
        }
        # the common configuration (slot mode, one FIFO, offer matching, no fairness, no hand-over) has lean
        # handlers for the two messages of every task's life and of every heartbeat (same decisions)
        self._lean = (
            not self.resource_mode
            and fair is None
            and self._single
            and not self.scan
            and handoff_after is None
            and not self._admits  # the lean offer books inline
        )
        self._done_inline = self._lean and not full_pull  # on_message_done's inline path (unless a step is open)
        if self._lean:
            self._handlers[TaskDone] = self._on_done_lean
            self._handlers[StateDelta] = self._on_delta_lean
        # a job's tasks are placed in one compiled call (lean configuration, round-robin partitions, policy random)
        self._job_kernel = None
        if self._lean and self._pick_random is not None:
            from megha.model.constraints import NUM_CONSTRAINTS
            from megha.schedulers.megha._kernels import place_tasks

            self._job_kernel = place_tasks
            self._n_constraints = NUM_CONSTRAINTS
            self._ubuf_src: list | None = None  # FastRandom's block of uniforms, and its copy as an array
            self._ubuf = np.zeros(0)
            self._handlers[JobArrival] = self._on_job_lean
        # one-task reports (the simulator's recorder has them; another recorder gets a one-element list)
        self._decided_one = getattr(recorder, "decided_one", None) or (lambda t, now: recorder.decided([t], now))
        self._known_one = getattr(recorder, "completion_known_one", None) or (
            lambda t, now: recorder.completion_known([t], now)
        )
        # the simulator's recorder: the hot path appends to its lists itself (TaskRecorder.inline_logs)
        self._logs = recorder.inline_logs() if type(recorder) is TaskRecorder else None
        self._comm_inline: bool | None = None  # a route's add_comm_one is this recorder's (known at first use)

    def attach(self, port: Port) -> None:
        super().attach(port)
        self.rnd = FastRandom(port.rng)
        # the simulator's direct deliveries (SimPort.route): one-mapping launch requests to the LMs' own handler
        self._routes = getattr(port, "routes", None)
        self._route = getattr(port, "route", None)

    def on_start(self, now: float) -> None:
        if not self.fresh_view:  # a (re)started GM rebuilds its view from the LMs
            for a in self._lm_addr:
                self.port.send(a, SyncRequest(self.g))

    def on_message(self, msg: Any, now: float) -> None:
        h = self._handlers.get(type(msg))
        if h is None:
            raise TypeError(f"{self.address}: unexpected message {type(msg).__name__}")
        h(msg, now)

    # --- extension hooks (docs/extending.md): what a subclass (the live runtime's GM) builds on ----------------
    def handle(self, cls: type, handler: Callable[[Any, float], None]) -> Callable[[Any, float], None] | None:
        """Make ``handler(msg, now)`` this GM's handler of messages of type ``cls`` and return the handler it
        replaces (None for a new type), which the new one may call to keep the GM's own behaviour.

        Call it from a subclass's ``__init__`` after ``super().__init__()``. The handler runs for every message of
        that type (:meth:`on_message` looks it up by exact type); it may use the other hooks and the GM's public
        state. The handlers the simulator delivers to directly (:meth:`on_message_done`, :meth:`on_message_delta`)
        fall back to the registered handler outside the lean configuration, which a subclass that overrides
        :meth:`admit` is never in."""
        prev = self._handlers.get(cls)
        self._handlers[cls] = handler
        return prev

    def admit(self, e: tuple, w: int) -> bool:
        """Hook: the GM is about to book worker ``w`` for queue entry ``e`` (``(task, duration, mask, demand,
        user, job)``, see :mod:`.fairness`); True books it, False drops the task (neither booked nor queued: the
        subclass answers for it, e.g. the live GM drops a task an LM already runs).

        Called once per placement, only when a subclass overrides it (the default is never called). It may record
        ``e``; it must not send messages, set timers or place tasks. Overriding it turns the GM's inlined booking
        paths off (the lean configuration): a cost of about one Python call per placement."""
        return True

    def handing_over(self, e: tuple, lm: int) -> bool:
        """Hook: queue entry ``e`` waited ``handoff_after`` seconds and is about to be handed to LM ``lm`` (the
        starvation remedy, :mod:`.handoff`); True hands it over, False drops it (neither handed over nor queued: the
        subclass answers for it, e.g. the live GM drops a task an LM already holds). It may record ``e`` (the live
        GM does, to queue the task again if the LM hands it back); it must not send messages, set timers or place
        tasks. The default hands every task over."""
        return True

    def _book_admitted(self, e: tuple, w: int) -> None:
        """:meth:`_book` behind :meth:`admit` (this GM's ``_book`` when a subclass overrides :meth:`admit`), with
        :meth:`_book` inlined: two Python calls per booking, as many as an override of ``_book`` calling it."""
        if self.admit(e, w):
            self.view.take(w, e[E_DEMAND])  # _book, inlined: keep the two alike
            lm = self._lm_of[w]
            b = self._batch[lm]
            if not b:
                self._dirty.append(lm)
            b.append((e, w))

    @contextmanager
    def hold_launches(self, now: float) -> Iterator[None]:
        """Within this block the launch requests booked by the GM's steps are not sent at the end of each step but
        all at the block's end (one request per LM, at most ``batch_size`` mappings each), at time ``now``.

        For a caller that hands the GM several inputs at once (the live GM's batch of jobs). A block inside a block
        sends at the outer block's end. Leaving it by an exception sends nothing."""
        if "_flush" in self.__dict__:  # already held
            yield
            return
        self._flush = _no_flush  # the steps' sends wait (an instance attribute: nothing to test when not held)
        try:
            yield
        finally:
            del self._flush
        self._flush(now)

    def requeue(self, entries: list[tuple], front: bool, now: float) -> None:
        """Tasks this GM placed come back to it (an LM handed them back): their fairness usage ends, each is placed
        again if the view allows, else queued (at the head if ``front``, else at the tail), and the launch requests
        leave at once. ``entries`` are queue entries (see :meth:`admit`)."""
        if self.fair is not None:
            for e in entries:
                self._end_usage(e[E_TASK])
        self._requeue(entries, front, now)
        self._flush(now)

    def adopt_running(self, entries: list[tuple]) -> None:
        """Hook: tasks of this GM's users that an earlier incarnation of this GM placed and that an LM reports it
        runs (the live GM after a restart) become this GM's running tasks, as if it had placed them: with fairness
        shares their usage starts (so the GM's per-user usage is what it was before the restart) and a preemption
        or a hand-back of one queues it again. ``entries`` are queue entries (see :meth:`admit`); a task already
        counted is skipped, so the same report may come twice. Without fairness shares it does nothing."""
        if self.fair is None:
            return
        running = self.running
        for e in entries:
            if e[E_TASK] not in running:
                self._start_usage(e)

    # --- placement ----------------------------------------------------------------------------------------
    def _place(self, e: tuple, now: float) -> bool:
        """Find a worker for entry ``e`` in the view and book it; False when there is none."""
        if self._seg_scan:
            return self._place_slot(e)
        cand = self.view.candidates(e[E_MASK], e[E_DEMAND])
        if cand is None:
            return False
        idx = self.layout.idx
        has = idx.segments_with(cand)
        if self.partition_order != "round-robin":
            return self._place_ordered(e, cand, has)
        order = self._int[self.rr_int]
        h = has[order]
        k = int(h.argmax())
        if h[k]:
            seg = int(order[k])
            self.rr_int = (seg // self._G + 1) % self.layout.n_lms
        else:
            if not self.repartition or self._G == 1:  # one GM: there are no external partitions
                return False
            order = self._ext[self.rr_ext]
            h = has[order]
            k = int(h.argmax())
            if not h[k]:
                return False
            seg = int(order[k])
            self.rr_ext = (seg // self._G + 1) % self.layout.n_lms
            self.counters["repartition_requests"] += 1
        w = idx.pick(cand, seg, self.policy, self.rnd)
        self._book(e, w)
        return True

    def _place_slot(self, e: tuple) -> bool:
        """:meth:`_place` in slot mode with round-robin partitions: the GM's partitions are searched one at a time
        in its order, stopping at the first with a free worker that suits the task (the same choice)."""
        view = self.view
        if view.n_free <= 0:
            return False
        idx = self.layout.idx
        static = idx.static_vector(e[E_MASK])
        avail = view.avail
        starts = idx.seg_word_start
        if self._pick_random is not None:
            # policy random: the search and the worker's draw in one compiled call (the same draw: the uniform number
            # the pick would take, consumed only when a worker is found)
            rnd = self.rnd
            u = rnd.peek()
            order = self._int[self.rr_int]
            k, b = self._pick_random(avail, static, order, starts, u)
            if k >= 0:
                seg = int(order[k])
                self.rr_int = (seg // self._G + 1) % self.layout.n_lms
            else:
                if not self.repartition or self._G == 1:
                    return False
                order = self._ext[self.rr_ext]
                k, b = self._pick_random(avail, static, order, starts, u)
                if k < 0:
                    return False
                seg = int(order[k])
                self.rr_ext = (seg // self._G + 1) % self.layout.n_lms
                self.counters["repartition_requests"] += 1
            rnd.skip()
            w = self._worker_at_bit[b]
            if not self._book_inline:
                self._book(e, w)
                return True
            # _book and SlotView.take, inlined (slot mode: the search found the worker free in the view)
            if view._flag[w]:
                view._words[view._word_of[w]] &= ~view._bit_of[w]
                view._flag[w] = 0
                view.n_free -= 1
            view.inflight[w] += 1
            lm = self._lm_of[w]
            batch = self._batch[lm]
            if not batch:
                self._dirty.append(lm)
            batch.append((e, w))
            return True
        first = self._first_seg
        order = self._int[self.rr_int]
        k = first(avail, static, order, starts)
        if k >= 0:
            seg = int(order[k])
            self.rr_int = (seg // self._G + 1) % self.layout.n_lms
        else:
            if not self.repartition or self._G == 1:  # one GM: there are no external partitions
                return False
            order = self._ext[self.rr_ext]
            k = first(avail, static, order, starts)
            if k < 0:
                return False
            seg = int(order[k])
            self.rr_ext = (seg // self._G + 1) % self.layout.n_lms
            self.counters["repartition_requests"] += 1
        lo, hi = self._seg_lo[seg], self._seg_lo[seg + 1]
        w = idx.pick_in(np.bitwise_and(avail[lo:hi], static[lo:hi]), lo, self.policy, self.rnd)
        self._book(e, w)
        return True

    def _pick_segment(self, has: np.ndarray, order: np.ndarray) -> int:
        """A segment of ``order`` with a candidate: the first one, or one at random (``partition_order``)."""
        h = has[order]
        if self.partition_order == "first":
            k = int(h.argmax())
            return int(order[k]) if h[k] else -1
        nz = np.flatnonzero(h)
        return int(order[nz[self.rnd.below(nz.size)]]) if nz.size else -1

    def _place_ordered(self, e: tuple, cand: np.ndarray, has: np.ndarray) -> bool:
        """:meth:`_place` with a fixed (first-fit in LM order) or random choice of partition."""
        seg = self._pick_segment(has, self._int_first)
        if seg < 0:
            if not self.repartition or self._G == 1:
                return False
            seg = self._pick_segment(has, self._ext_first)
            if seg < 0:
                return False
            self.counters["repartition_requests"] += 1
        w = self.layout.idx.pick(cand, seg, self.policy, self.rnd)
        self._book(e, w)
        return True

    def _drain(self, now: float) -> None:
        """``matching=scan``: place queued tasks in queue order on the view until nothing more fits."""
        if len(self.queue):
            key = (lambda e: (e[E_MASK], tuple(e[E_DEMAND]))) if self.resource_mode else None
            fits = None if self.resource_mode else self._queued_mask_fit
            self.queue.drain(lambda e: self._place(e, now), key, fits)

    def _queued_mask_fit(self, masks: np.ndarray, heads: np.ndarray, n: int) -> tuple[set, set]:
        """Slot mode (:data:`.jobqueue.MaskFit`): the queued masks that no worker free in the view satisfies — for
        them :meth:`_place` refuses every task and changes nothing — and the others."""
        view = self.view
        if view.n_free <= 0:
            return set(masks[:n][heads[:n] != _INF].tolist()), set()
        if self._mask_fit is None:
            from megha.schedulers.megha._scan_kernels import queued_mask_fit

            self._mask_fit = queued_mask_fit
        out_m = self._fit_masks
        if out_m.size < n:
            out_m = self._fit_masks = np.zeros(2 * n, dtype=np.int64)
            self._fit_flags = np.zeros(2 * n, dtype=np.bool_)
        idx = self.layout.idx
        c = self._mask_fit(masks, heads, n, view.avail, idx.valid, idx.constraint_vectors, out_m, self._fit_flags)
        fit = self._fit_flags[:c]
        return set(out_m[:c][~fit].tolist()), set(out_m[:c][fit].tolist())

    def _lm_for_mask(self, mask: int) -> tuple[int, int]:
        """How many workers have every constraint of ``mask``, and the LM whose cluster has the most of them."""
        got = self._lm_for.get(mask)
        if got is None:
            idx = self.layout.idx
            per_word = np.bitwise_count(idx.static_vector(mask)).astype(np.int64)
            per_lm = np.add.reduceat(per_word, idx.seg_word_start[:-1]).reshape(self.layout.n_lms, self._G).sum(1)
            got = self._lm_for[mask] = (int(per_lm.sum()), int(per_lm.argmax()))
        return got

    def _handoff(self, now: float) -> None:
        """Hand the tasks queued for ``handoff_after`` seconds or more to LMs (oldest first)."""
        q = self.queue.q
        cut = now - self.handoff_after
        arrived = self._arrived
        by_lm: dict[int, list[tuple]] = {}
        n = q._n_slots
        waiting = self._rare_slots(q) & (q._heads[:n] != _INF)
        for s in np.flatnonzero(waiting).tolist():  # the oldest tasks of each mask that only a few workers suit
            b = q._buckets[s]
            lm = self._lm_for_mask(int(q._masks[s]))[1]
            while b and arrived.get(b[0][1][E_TASK], now) <= cut:
                by_lm.setdefault(lm, []).append(b.popleft()[1])
                q._len -= 1
            q._heads[s] = b[0][0] if b else _INF
            if not b:
                q._empty_slots += 1
        for lm, es in by_lm.items():
            es = [e for e in es if self.handing_over(e, lm)]
            if not es:
                continue
            self.counters["handoffs"] += len(es)
            self.port.send(
                self._lm_addr[lm],
                Handoff(
                    self.g,
                    [e[E_TASK] for e in es],
                    [e[E_DUR] for e in es],
                    [e[E_MASK] for e in es],
                    [e[E_USER] for e in es],
                    [arrived.get(e[E_TASK], now) for e in es],
                ),
            )

    def _rare_slots(self, q: Any) -> np.ndarray:
        """For each slot of the wait queue ``q``, whether its mask suits at most ``handoff_rare`` workers.

        Cached per slot: a slot keeps its mask until the queue re-indexes its slots (compaction, growth), which
        gives it a new mask array, and then the flags are computed again."""
        masks = q._masks
        n = q._n_slots
        if masks is not self._rare_masks_of:
            self._rare_masks_of = masks
            self._rare_flags = np.zeros(masks.size, dtype=bool)
            self._rare_known = 0
        flags = self._rare_flags
        rare = self.handoff_rare
        for s in range(self._rare_known, n):
            flags[s] = self._lm_for_mask(int(masks[s]))[0] <= rare
        self._rare_known = max(self._rare_known, n)
        return flags[:n]

    def _arm_handoff(self) -> None:
        if not self._handoff_armed and len(self.queue):
            self._handoff_armed = True
            self.port.set_timer(self.handoff_after / 4, "handoff")

    def _pull(self, now: float, rounds: int = 1) -> None:
        """Ask every LM for its state (answered by StateDelta with this pull's id); ``rounds``: the updates it
        stands for (``pull_overwrites``)."""
        if self.pull_overwrites is not None:
            last = self._pull_seq
            if self._ow_pull_at == now and last in self._pulls:  # one pull per instant: this update joins it
                self._ow_rounds[last] += rounds
                return
            self._ow_pull_at = now
            self._ow_rounds[last + 1] = rounds
        self._pull_seq += 1
        self._pulls[self._pull_seq] = self.layout.n_lms
        self.counters["state_pulls"] += 1
        for a in self._lm_addr:
            self.port.send(a, StatePull(self.g, self._pull_seq))

    def _release_all(self, workers: list[int]) -> None:
        release = self.view.release
        for w in workers:
            release(w, None)

    def _book(self, e: tuple, w: int) -> None:
        self.view.take(w, e[E_DEMAND])
        lm = self._lm_of[w]
        b = self._batch[lm]
        if not b:
            self._dirty.append(lm)
        b.append((e, w))

    def _flush(self, now: float) -> None:
        """Send the mappings booked in this step: one launch request per LM (at most ``batch_size`` each)."""
        if self.handoff_after is not None:
            self._arm_handoff()
        dirty = self._dirty
        if not dirty:
            return
        if self._ow_defer:  # pull_overwrites: sent at the end of the instant, see _ow_send
            if not self._ow_armed:
                self._ow_armed = True
                self.port.set_timer(0.0, "overwrite_flush")
            return
        bs = self.batch_size
        batches = self._batch
        unacked = self.unacked
        send = self.port.send
        decided: list[int] = []
        dem = None
        routes = None if self.resource_mode else self._routes
        for lm in dirty:
            b = batches[lm]
            batches[lm] = []
            addr = self._lm_addr[lm]
            by_lm = self.unacked_by_lm[lm]
            for lo in range(0, len(b), bs):
                if len(b) == 1:
                    ((e, w),) = b
                    t = e[E_TASK]
                    if routes is not None:  # slot mode, one mapping: the direct delivery _launch_one uses
                        r = routes.get(self._launch_keys[lm])
                        if r is None:
                            r = self._route(addr, "on_message_launch", LaunchRequest)
                        if r:  # the same event as the LaunchRequest, a tuple instead (see SimPort.route)
                            self.req_seq += 1
                            req = self.req_seq
                            unacked[req] = (lm, [w], None, [e], None)
                            by_lm.append(req)
                            decided.append(t)
                            append, handler, d, nxt, cell, comm = r
                            cell[0] += 1
                            if comm is not None:
                                comm(t, d)
                            append((now + d, nxt(), handler, (self.g, req, t, w, e[E_DUR], e[E_USER])))
                            continue
                    entries = [e]
                    tasks = [t]
                    workers = [w]
                    durs = [e[E_DUR]]
                    users = [e[E_USER]]
                else:
                    chunk = b[lo : lo + bs]
                    entries = [e for e, _ in chunk]
                    tasks = [e[E_TASK] for e in entries]
                    workers = [w for _, w in chunk]
                    durs = [e[E_DUR] for e in entries]
                    users = [e[E_USER] for e in entries]
                if self.resource_mode:
                    dem = np.array([e[E_DEMAND] for e in entries])
                self.req_seq += 1
                req = self.req_seq
                unacked[req] = (lm, workers, dem, entries, None)
                by_lm.append(req)
                decided.extend(tasks)
                send(addr, LaunchRequest(self.g, req, tasks, workers, durs, users, dem))
        dirty.clear()
        self.rec.decided(decided, now)

    def _offer(self, w: int, now: float) -> None:
        """Worker ``w`` gained capacity in the view: give it to the first queued task(s) that fit."""
        wm = int(self._masks[w])
        usage = self._usage() if self.fair is not None else None
        if self.resource_mode:
            view = self.view
            queue = self.queue
            while True:
                # every queued demand is >= queue.dmin: when that does not fit, nothing does (skip the scan)
                if queue.dmin is None or not view.fits(w, queue.dmin):
                    return
                room = (view.free[w] + _EPS).tolist()  # view.fits with plain floats (called per queued entry)

                def accept(x, room=room):
                    d = x[E_DEMAND]
                    for k, r in enumerate(room):  # noqa: SIM110 - faster than all() over a generator
                        if d[k] > r:
                            return False
                    return True

                e = queue.pop_fitting(wm, accept, usage)
                if e is None:
                    return
                self._book(e, w)
        else:
            e = self.queue.pop_fitting(wm, None, usage, self._inv_masks[w])
            if e is None:
                self.view.release(w, None)
            else:
                self._book(e, w)

    def _offer_all(self, workers: list[int], now: float) -> None:
        """:meth:`_offer` for each worker in turn (inlined in slot mode without fairness, the hot path)."""
        if not workers:
            return
        if self.resource_mode or self.fair is not None or not self._single:
            for w in workers:
                self._offer(w, now)
            return
        q = self.queue.q  # MaskQueue.pop_first_fitting_inv, inlined
        ff = first_fit_kernel()
        inv = self._inv_masks
        book = self._book
        view = self.view
        for w in workers:
            s = ff(q._masks, q._heads, q._n_slots, inv[w]) if q._len else -1
            if s < 0:
                view.release(w, None)
            else:
                book(q._take(s), w)

    def _apply_truth(self, workers, state) -> list[int]:
        view = self.view
        if self.resource_mode:
            gained = []
            for i, w in enumerate(_as_list(workers)):
                if view.apply_truth(w, state[i]):
                    gained.append(w)
            return gained
        return view.apply_truths(_as_list(workers), _as_list(state))

    # --- handlers -----------------------------------------------------------------------------------------
    def _on_job(self, msg: JobArrival, now: float) -> None:
        user = int(self.job_user[msg.job]) if self.job_user is not None else int(msg.user)
        job = msg.job
        if self.handoff_after is not None:
            self._arrived.update(dict.fromkeys(msg.tasks.tolist(), now))
        if self.scan:  # the 2020 simulator: the job joins the queue, then the queue is served in order
            dem = msg.demands
            push = self.queue.push_back
            durs = msg.durations.tolist()
            masks = msg.masks.tolist()
            for i, t in enumerate(msg.tasks.tolist()):
                push((t, durs[i], masks[i], None if dem is None else dem[i], user, job))
            self._drain(now)
            self._flush(now)
            return
        tasks = msg.tasks.tolist()
        durs = msg.durations.tolist()
        masks = msg.masks.tolist()
        dem = msg.demands
        place = self._place
        # placing only books workers, so once a constraint mask finds nothing in this job, later tasks with the
        # same mask cannot either (slot mode: a task's fit depends on its mask alone)
        failed: set[int] = set()
        slot = not self.resource_mode
        queue = self.queue
        # where unplaced tasks go: _contended; without fairness the queue's tail (in slot mode straight into the
        # MaskQueue, as SingleQueue.push_back does)
        direct = queue.q.push_back if slot and not self.preemption and type(queue) is SingleQueue else None
        for i, t in enumerate(tasks):
            e = (t, durs[i], masks[i], None if dem is None else dem[i], user, job)
            if slot and masks[i] in failed:
                pass
            elif place(e, now):
                continue
            elif slot:
                failed.add(masks[i])
            if direct is not None:
                direct(e, masks[i])
            else:
                self._contended(e, now)
        self._flush(now)

    def _on_job_lean(self, msg: JobArrival, now: float) -> None:
        """:meth:`_on_job` in the lean configuration with policy random: the job's placements in one compiled call
        (:func:`._kernels.place_tasks`: the same searches, draws and bookings as :meth:`_place_slot` task by task),
        then the bookings and the queue in one loop."""
        user = int(self.job_user[msg.job]) if self.job_user is not None else int(msg.user)
        job = msg.job
        tasks = msg.tasks.tolist()
        durs = msg.durations.tolist()
        marr = np.asarray(msg.masks)
        if marr.dtype != np.uint32:
            marr = marr.astype(np.uint32)
        masks = marr.tolist()
        dem = msg.demands
        n = len(tasks)
        view = self.view
        idx = self.layout.idx
        out = np.empty(n, dtype=np.int64)
        failed = np.empty(n, dtype=np.int64)
        rnd = self.rnd
        kernel = self._job_kernel
        i = n_failed = 0
        while True:
            buf = rnd._buf
            if buf is not self._ubuf_src:  # a new block of uniforms (FastRandom draws 4,096 at a time)
                self._ubuf_src = buf
                self._ubuf = np.array(buf, dtype=np.float64)
            i, self.rr_int, self.rr_ext, view.n_free, upos, n_rep, n_failed = kernel(
                view.avail,
                idx.valid,
                idx.constraint_vectors,
                self._n_constraints,
                marr,
                i,
                out,
                failed,
                n_failed,
                self._int,
                self._ext,
                idx.seg_word_start,
                self._G,
                self.layout.n_lms,
                self.repartition,
                self.rr_int,
                self.rr_ext,
                view.n_free,
                self._ubuf,
                rnd._i,
            )
            rnd._i = upos
            if n_rep:
                self.counters["repartition_requests"] += n_rep
            if i >= n:
                break
            rnd.peek()  # the next block of uniforms, drawn when _place_slot's peek would draw it
        flag = view._flag
        inflight = view.inflight
        at_bit = self._worker_at_bit
        lm_of = self._lm_of
        batches = self._batch
        dirty = self._dirty
        q = self.queue.q
        slot_of = q._slot_of
        buckets = q._buckets
        back = q._back
        queued = 0
        for i, b in enumerate(out.tolist()):
            e = (tasks[i], durs[i], masks[i], None if dem is None else dem[i], user, job)
            if b >= 0:  # booked (_book and SlotView.take: the kernel cleared its bit and counted it)
                w = at_bit[b]
                flag[w] = 0
                inflight[w] += 1
                lm = lm_of[w]
                batch = batches[lm]
                if not batch:
                    dirty.append(lm)
                batch.append((e, w))
            else:  # MaskQueue.push_back, inlined
                m = masks[i]
                s = slot_of.get(m)
                if s is None:
                    s = q._slot(m)
                back += 1
                bucket = buckets[s]
                if not bucket:
                    q._heads[s] = back
                    q._empty_slots -= 1
                bucket.append((back, e))
                queued += 1
        q._back = back
        q._len += queued
        self._flush(now)

    def _ack(self, lm: int, upto: int) -> None:
        """The LM processed every request of this GM up to ``upto``: they are no longer in flight."""
        q = self.unacked_by_lm[lm]
        while q and q[0] <= upto:
            _, workers, dem, entries, rejected = self.unacked.pop(q.popleft())
            self.view.acked(workers, dem)
            if self.fair is not None:
                for e in entries:
                    if rejected is None or e[E_TASK] not in rejected:
                        self._start_usage(e)

    def _on_reply(self, msg: LaunchReply, now: float) -> None:
        if self.fair is not None and msg.usage is not None:
            self.lm_usage[msg.lm] = msg.usage
        rejected_entries = []
        pending = self.unacked.get(msg.req)
        if pending is not None and len(msg.rejected):
            rej = set(_as_list(msg.rejected))
            rejected_entries = [e for e in pending[3] if e[E_TASK] in rej]
            self.counters["rejections_received"] += len(rejected_entries)
            self.unacked[msg.req] = (*pending[:4], rej)
        self._ack(msg.lm, msg.acked)
        gained = self._apply_truth(msg.delta_workers, msg.delta_state)
        if self.reject == "retry":  # at once against the refreshed view; what does not fit goes to the head
            failed = [e for e in rejected_entries if not self._place(e, now)]
        else:
            failed = rejected_entries
        for e in reversed(failed):
            self.queue.push_front(e)
        if self.scan:
            self._release_all(gained)
            if self.full_pull and rejected_entries:
                self._pull(now, len(rejected_entries))  # the queue is served again when every LM has answered
            else:
                self._drain(now)
        else:
            self._offer_all(gained, now)
        self._flush(now)

    def _on_done(self, msg: TaskDone, now: float) -> None:
        self._ack(msg.lm, msg.acked)
        self.rec.completion_known(msg.tasks, now)
        if msg.reused:  # the LM gave these workers to handed-over tasks: they are not ours to offer
            for t in _as_list(msg.tasks):
                self._arrived.pop(t, None)
            reused = set(msg.reused)
            ws = [w for w in _as_list(msg.workers) if w not in reused]
            self._offer_all(ws, now)
            self._flush(now)
            return
        if self._arrived:
            for t in _as_list(msg.tasks):
                self._arrived.pop(t, None)
        if self.fair is not None:
            for t in _as_list(msg.tasks):
                self._end_usage(t)
        view = self.view
        if self.queue_kind == "fewest-remaining":  # finished tasks lower their jobs' keys (megha20 profile)
            self.queue.finished(_as_list(msg.tasks))
        if self.scan:
            if self.resource_mode:
                for i, w in enumerate(_as_list(msg.workers)):
                    view.give_back(w, msg.demands[i])
            else:
                self._release_all(_as_list(msg.workers))
            if self.full_pull:
                self._pull(now, len(_as_list(msg.tasks)))
            else:
                self._drain(now)
        elif self.resource_mode:
            for i, w in enumerate(_as_list(msg.workers)):
                view.give_back(w, msg.demands[i])
                self._offer(w, now)
            if self.full_pull:
                self._pull(now)
        else:
            self._offer_all(_as_list(msg.workers), now)
            if self.full_pull:
                self._pull(now)
        self._flush(now)

    def _offer_lean(self, workers: list[int]) -> None:
        """:meth:`_offer_all` in the lean configuration: each freed worker to the first queued task it suits
        (one compiled first-fit per worker while the queue has tasks), else free in the view."""
        q = self.queue.q
        view = self.view
        flag = view._flag
        if not q._len:  # every worker free in the view (view._set(w, True), inlined)
            words, word_of, bit_of = view._words, view._word_of, view._bit_of
            n = 0
            for w in workers:
                if not flag[w]:
                    words[word_of[w]] |= bit_of[w]
                    flag[w] = 1
                    n += 1
            view.n_free += n
            return
        ff = first_fit_kernel()
        inv = self._inv_masks
        inflight = view.inflight
        lm_of = self._lm_of
        batch = self._batch
        words, word_of, bit_of = view._words, view._word_of, view._bit_of
        for w in workers:
            s = ff(q._masks, q._heads, q._n_slots, inv[w]) if q._len else -1
            if s < 0:
                if not flag[w]:  # view._set(w, True), inlined
                    words[word_of[w]] |= bit_of[w]
                    flag[w] = 1
                    view.n_free += 1
            else:  # _book, inlined
                e = q._take(s)
                if flag[w]:
                    view._set(w, False)
                inflight[w] += 1
                b = batch[lm_of[w]]
                if not b:
                    self._dirty.append(lm_of[w])
                b.append((e, w))

    def _ack_lean(self, q: deque, upto: int) -> None:
        """:meth:`_ack` in the lean configuration (slot mode, no fairness)."""
        unacked = self.unacked
        inflight = self.view.inflight
        while q and q[0] <= upto:
            for w in unacked.pop(q.popleft())[1]:
                inflight[w] -= 1

    def _launch_one(self, e: tuple, w: int, now: float) -> None:
        """:meth:`_book` then :meth:`_flush` for a step that places one task (lean configuration): the view is
        updated, one launch request of one mapping goes to the worker's LM."""
        view = self.view
        if view._flag[w]:
            view._set(w, False)
        view.inflight[w] += 1
        lm = self._lm_of[w]
        self.req_seq += 1
        req = self.req_seq
        t = e[E_TASK]
        workers = [w]
        self.unacked[req] = (lm, workers, None, [e], None)
        self.unacked_by_lm[lm].append(req)
        routes = self._routes
        if routes is not None:
            r = routes.get(self._launch_keys[lm])
            if r is None:
                r = self._route(self._lm_addr[lm], "on_message_launch", LaunchRequest)
            if r:  # in the simulator: the same event, a tuple instead of a LaunchRequest (see SimPort.route)
                append, handler, d, nxt, cell, comm = r
                cell[0] += 1
                if comm is not None:
                    comm(t, d)
                append((now + d, nxt(), handler, (self.g, req, t, w, e[E_DUR], e[E_USER])))
                self._decided_one(t, now)
                return
        self.port.send(self._lm_addr[lm], LaunchRequest(self.g, req, [t], workers, [e[E_DUR]], [e[E_USER]], None))
        self._decided_one(t, now)

    def on_message_done(self, p: tuple, now: float) -> None:
        """A :class:`TaskDone` of one task delivered directly by the simulator's in-process LM (``SimPort.route``):
        ``p = (lm, task, worker, acked)``. :meth:`_on_done_lean` for it, with :meth:`_ack_lean`,
        :meth:`MaskQueue._take`, :meth:`_launch_one` and the recorder's one-task reports inlined (the hot path of a
        loaded run: one call per task instead of seven); other configurations take the message."""
        lm, t, w, acked = p
        if not self._done_inline or self._dirty:
            return self.on_message(TaskDone(lm, [t], [w], None, acked), now)
        q = self.unacked_by_lm[lm]
        view = self.view
        if q and q[0] <= acked:  # _ack_lean
            unacked = self.unacked
            inflight = view.inflight
            while q and q[0] <= acked:
                for x in unacked.pop(q.popleft())[1]:
                    inflight[x] -= 1
        logs = self._logs
        if logs is None:
            self._known_one(t, now)
        else:  # TaskRecorder.completion_known_one, inlined
            logs.known_ids.append(t)
            logs.known_times.append(now)
            rec = self.rec
            o = rec.outstanding = rec.outstanding - 1
            if not o & FLUSH_EVERY or o <= 0:
                rec.known_done()
        mq = self.queue.q
        if mq._len:
            s = (_fairness._FF or first_fit_kernel())(mq._masks, mq._heads, mq._n_slots, self._inv_masks[w])
            if s >= 0:
                # MaskQueue._take(s), inlined
                b = mq._buckets[s]
                e = b.popleft()[1]
                mq._len -= 1
                if b:
                    mq._heads[s] = b[0][0]
                else:
                    mq._heads[s] = _INF
                    mq._empty_slots += 1
                    if mq._empty_slots > 64 and mq._empty_slots * 2 > mq._n_slots:
                        mq._compact()
                # _launch_one(e, w, now), inlined
                if view._flag[w]:
                    view._set(w, False)
                view.inflight[w] += 1
                lm = self._lm_of[w]
                req = self.req_seq = self.req_seq + 1
                t = e[0]  # E_TASK
                self.unacked[req] = (lm, [w], None, [e], None)
                self.unacked_by_lm[lm].append(req)
                routes = self._routes
                if routes is not None:
                    r = routes.get(self._launch_keys[lm])
                    if r is None:
                        r = self._route(self._lm_addr[lm], "on_message_launch", LaunchRequest)
                    if r:  # in the simulator: the same event, a tuple instead of a LaunchRequest (see SimPort.route)
                        append, handler, d, nxt, cell, comm = r
                        cell[0] += 1
                        if comm is not None:
                            inline = self._comm_inline
                            if inline is None:
                                inline = logs is not None and getattr(comm, "__self__", 0) is self.rec
                                self._comm_inline = inline
                            if inline:
                                logs.comm_ids.append(t)
                                logs.comm_delays.append(d)
                            else:
                                comm(t, d)
                        append((now + d, nxt(), handler, (self.g, req, t, w, e[E_DUR], e[E_USER])))
                        if logs is None:
                            self._decided_one(t, now)
                        else:
                            logs.decided_ids.append(t)
                            logs.decided_times.append(now)
                        return
                self.port.send(self._lm_addr[lm], LaunchRequest(self.g, req, [t], [w], [e[E_DUR]], [e[E_USER]], None))
                self._decided_one(t, now)
                return
        if not view._flag[w]:  # view._set(w, True), inlined
            view._words[view._word_of[w]] |= view._bit_of[w]
            view._flag[w] = 1
            view.n_free += 1

    def _on_done_lean(self, msg: TaskDone, now: float) -> None:
        """:meth:`_on_done` in the lean configuration."""
        tasks = msg.tasks
        workers = msg.workers
        if type(tasks) is not list:
            tasks = _as_list(tasks)
            workers = _as_list(workers)
        if len(tasks) == 1 and not self.full_pull and not self._dirty:  # one task done (the usual case)
            return self.on_message_done((msg.lm, tasks[0], workers[0], msg.acked), now)
        q = self.unacked_by_lm[msg.lm]
        if q and q[0] <= msg.acked:
            self._ack_lean(q, msg.acked)
        self.rec.completion_known(tasks, now)
        self._offer_lean(workers)
        if self.full_pull:
            self._pull(now)
        if self._dirty:
            self._flush(now)

    def _on_delta_lean(self, msg: StateDelta, now: float) -> None:
        """:meth:`_on_delta` in the lean configuration."""
        if msg.pull:
            left = self._pulls[msg.pull] - 1
            if left:
                self._pulls[msg.pull] = left
            else:
                del self._pulls[msg.pull]
        workers = msg.workers
        state = msg.state
        if type(workers) is not list or type(state) is not list:
            workers = _as_list(workers)
            state = _as_list(state)
        self.on_message_delta((msg.lm, workers, state, None, msg.acked), now)

    def on_message_delta(self, p: tuple, now: float) -> None:
        """A heartbeat's :class:`StateDelta` delivered directly by the simulator's LM (``SimPort.route``):
        ``p = (lm, workers, their truths, changed by, acked)`` (lists). The LM sends every GM the same lists, the
        workers changed since its last heartbeat with the GM whose task changed each (``changed by``); a GM skips
        those it changed itself (what the LM leaves out of a StateDelta). ``changed by`` is None when every entry is
        for this GM. :meth:`_on_delta_lean`'s work; other configurations take the message."""
        lm, workers, state, bys, acked = p
        if not self._lean:
            if bys is not None:
                g = self.g
                keep = [i for i, by in enumerate(bys) if by != g]
                workers = [workers[i] for i in keep]
                state = [state[i] for i in keep]
            return self.on_message(StateDelta(lm, workers, state, False, None, acked), now)
        q = self.unacked_by_lm[lm]
        if q and q[0] <= acked:  # _ack_lean, inlined
            unacked = self.unacked
            inflight = self.view.inflight
            while q and q[0] <= acked:
                for x in unacked.pop(q.popleft())[1]:
                    inflight[x] -= 1
        self.counters["updates_received"] += 1
        # SlotView.apply_truths, inlined (a worker busy in truth and free in the view is booked out of the view)
        view = self.view
        inflight = view.inflight
        flag = view._flag
        gained = []
        words, word_of, bit_of = view._words, view._word_of, view._bit_of
        n_taken = 0
        if bys is None:
            for w, s in zip(workers, state, strict=True):
                if s and inflight[w] == 0:
                    if not flag[w]:
                        gained.append(w)
                elif flag[w]:  # view._set(w, False), inlined
                    words[word_of[w]] &= ~bit_of[w]
                    flag[w] = 0
                    n_taken += 1
        else:
            g = self.g
            for w, s, by in zip(workers, state, bys, strict=True):
                if by == g:  # a change of this GM's own task: not in its StateDelta
                    continue
                if s and inflight[w] == 0:
                    if not flag[w]:
                        gained.append(w)
                elif flag[w]:  # view._set(w, False), inlined
                    words[word_of[w]] &= ~bit_of[w]
                    flag[w] = 0
                    n_taken += 1
        view.n_free -= n_taken
        if not gained:
            return
        if len(gained) == 1 and not self._dirty:  # _offer_lean and _flush for one worker
            w = gained[0]
            mq = self.queue.q
            if mq._len:
                s = (_fairness._FF or first_fit_kernel())(mq._masks, mq._heads, mq._n_slots, self._inv_masks[w])
                if s >= 0:
                    self._launch_one(mq._take(s), w, now)
                    return
            words[word_of[w]] |= bit_of[w]  # view._set(w, True), inlined
            flag[w] = 1
            view.n_free += 1
            return
        self._offer_lean(gained)
        if self._dirty:
            self._flush(now)

    def _on_delta(self, msg: StateDelta, now: float) -> None:
        if self.fair is not None and msg.usage is not None:
            self.lm_usage[msg.lm] = msg.usage
        self._ack(msg.lm, msg.acked)
        self.counters["updates_received"] += 1
        if msg.pull:
            left = self._pulls[msg.pull] - 1
            if left:
                self._pulls[msg.pull] = left
            else:
                del self._pulls[msg.pull]
        if self.scan:
            self._release_all(self._apply_truth(msg.workers, msg.state))
            if not msg.pull or msg.pull not in self._pulls:  # a heartbeat, or the last answer to a pull
                if self.pull_overwrites is None:
                    self._drain(now)
                else:
                    self._ow_drain(msg.pull, now)
            self._flush(now)
            return
        self._offer_all(self._apply_truth(msg.workers, msg.state), now)
        if self.preemption and now >= self._fair_not_before:
            self._fair_retry(now)
        self._flush(now)

    # --- pull_overwrites: the 2020 simulator's state pull (megha20 profile) --------------------------------------
    def _ow_drain(self, pull: int | None, now: float) -> None:
        """Serve the queue after an update as the 2020 simulator's GM does.

        Its ``update_status`` rebuilds the GM's view of every partition from the LMs' state, in which the GM's own
        bookings the LM has not verified yet still show free, and every completed or rejected task makes its own
        update. So each of the ``rounds`` updates a pull stands for frees those bookings in the view, then serves
        the queue in order: k updates at one instant book up to k times over the workers free then, and the LM
        keeps one booking per worker (:meth:`_ow_send`). A heartbeat is one update of this GM per beat, however
        many LMs report at that instant. A round that books nothing ends the rounds (the next would repeat it).
        """
        if pull:
            rounds = self._ow_rounds.pop(pull, 1)
        elif now == self._ow_beat:  # another LM's heartbeat of the same beat: no new update
            self._drain(now)
            return
        else:
            self._ow_beat = now
            rounds = 1
        queue = self.queue
        batch = self._batch
        view = self.view
        flag = view._flag
        self._ow_unverified(now)
        marks: dict[int, int] = {}
        for r in range(rounds):
            if r:  # free again the workers the previous round booked (the other unverified ones still are)
                for lm in self._dirty:
                    for _, w in batch[lm][marks.get(lm, 0) :]:
                        if not flag[w]:
                            view._set(w, True)
            marks = {lm: len(batch[lm]) for lm in self._dirty}
            if not len(queue) or not queue.drain(lambda e: self._place(e, now), None, self._queued_mask_fit):
                return

    def _ow_unverified(self, now: float) -> None:
        """Free in the view the workers of this GM's bookings no LM has verified yet: those of this instant and
        of the requests sent less than one GM -> LM delay ago."""
        log = self._ow_log
        cut = now - self.pull_overwrites + 1e-9  # a request sent at ``cut`` or before has reached its LM
        while log and log[0][0] <= cut:
            log.popleft()
        view = self.view
        flag = view._flag
        for _, ws in log:
            for w in ws:
                if not flag[w]:
                    view._set(w, True)
        for lm in self._dirty:
            for _, w in self._batch[lm]:
                if not flag[w]:
                    view._set(w, True)

    def _ow_send(self, now: float) -> None:
        """Send this instant's bookings (``pull_overwrites``). The reference's event queue orders events of the
        same instant by heap position (its events compare as always smaller), so its LM verifies the bookings
        of one instant in an effectively arbitrary order: here each LM's list is shuffled when it books a worker
        more than once, so which booking the LM keeps is random, not the first made."""
        rnd = self.rnd
        for lm in self._dirty:
            b = self._batch[lm]
            ws = [w for _, w in b]
            if len(set(ws)) < len(ws):
                for i in range(len(b) - 1, 0, -1):  # Fisher-Yates
                    j = rnd.below(i + 1)
                    b[i], b[j] = b[j], b[i]
                ws = [w for _, w in b]
            self._ow_log.append((now, ws))
        self._ow_defer = False
        try:
            self._flush(now)
        finally:
            self._ow_defer = True

    # --- fairness -----------------------------------------------------------------------------------------
    def _units(self, e: tuple) -> float:
        return float(e[E_DEMAND][0]) if self.resource_mode else 1.0

    def _start_usage(self, e: tuple) -> None:
        self.running[e[E_TASK]] = e
        self.own_usage[e[E_USER]] += self._units(e)

    def _end_usage(self, task: int) -> tuple | None:
        e = self.running.pop(task, None)
        if e is not None:
            self.own_usage[e[E_USER]] -= self._units(e)
        return e

    def _usage(self) -> np.ndarray:
        u = self.lm_usage.sum(axis=0)
        for user in self.my_users:  # exact for this GM's own users
            u[user] = self.own_usage[user]
        return u

    def _contended(self, e: tuple, now: float) -> None:
        """No worker anywhere in the view: queue, or (fairness) try to preempt an over-share user."""
        if not self.preemption:
            self.queue.push_back(e)
            return
        usage = self._usage()
        if not self.fair.under_share(e[E_USER], usage):
            self.queue.push_back(e)
            return
        if e[E_USER] in self._preempting_users() or not self._try_preempt(
            [e], self.fair.victims(e[E_USER], usage, self._units(e)), None, now
        ):
            self.queue.push_back(e)
            self._arm_fair()

    def _preempting_users(self) -> set[int]:
        return {p[0][0][E_USER] for p in self.preempting.values()}

    def _try_preempt(self, entries: list[tuple], victims: list[int], lms: list[int] | None, now: float) -> bool:
        """Ask an LM to preempt a victim for one of ``entries`` (same user); False when no victim is left."""
        while victims:
            v = victims[0]
            if lms is None:
                col = self.lm_usage[:, v]
                lms = [int(x) for x in np.argsort(-col, kind="stable") if col[x] > 0]
            if lms:
                lm = lms.pop(0)
                first = entries[0][E_TASK]
                self.preempting[first] = (entries, victims, lms)
                self.counters["preemption_attempts"] += 1
                tasks = np.array([x[E_TASK] for x in entries], dtype=np.int64)
                self.rec.decided(tasks, now)
                dem = np.array([x[E_DEMAND] for x in entries]) if self.resource_mode else None
                elsewhere = float(self.lm_usage[:, v].sum() - self.lm_usage[lm, v])
                self.port.send(
                    self._lm_addr[lm],
                    PreemptRequest(
                        self.g,
                        tasks,
                        np.array([x[1] for x in entries]),
                        np.array([x[E_MASK] for x in entries], dtype=np.uint32),
                        entries[0][E_USER],
                        v,
                        dem,
                        elsewhere,
                    ),
                )
                return True
            victims = victims[1:]
            lms = None
        return False

    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "overwrite_flush":
            self._ow_armed = False
            self._ow_send(now)
            return
        if key == "handoff":
            self._handoff_armed = False
            self._handoff(now)
            self._flush(now)
            return
        if key == "fair":
            self._fair_armed = False
            self._fair_retry(now)
            self._flush(now)

    def _arm_fair(self) -> None:
        if not self._fair_armed:
            self._fair_armed = True
            self.port.set_timer(self._fair_backoff, "fair")

    def _fair_retry(self, now: float) -> None:
        """Under contention, let the head tasks of each under-share user try placement, then preemption.

        Runs on every LM update and, while some user of this GM waits below its share, every ``fair_period``
        seconds (when nothing changes in the datacenter no update arrives to trigger it).
        """
        usage = self._usage()
        if any(len(self.queue.qs[u]) and self.fair.under_share(u, usage) for u in self.my_users):
            self._arm_fair()
        busy_users = self._preempting_users()
        for u in self.my_users:
            if u in busy_users or not self.fair.under_share(u, usage):
                continue
            # a victim must keep its share after giving up at least one task's units (FairShare.victims)
            q = self.queue.qs[u]
            dmin = self.queue.dmin  # resource mode: a lower bound of every queued demand
            smallest = 1.0 if not self.resource_mode else (0.0 if dmin is None else float(dmin[0]))
            if not self.fair.victims(u, usage, smallest):
                continue
            items = [it for it in self._preempt_candidates(q, usage, u) if not self._place(it[2], now)]
            cands = [it[2] for it in items]
            victims = self.fair.victims(u, usage, min((self._units(e) for e in cands), default=0.0))
            if cands and not self._try_preempt(cands, victims, None, now):
                q.unpop(items)

    def _preempt_candidates(self, q, usage: np.ndarray, u: int) -> list[tuple[int, int, tuple]]:
        """Queued tasks of user ``u`` to offer for a preemption, as :meth:`WaitQueue.pop_heads` items, oldest first.

        First the oldest task that each worker an LM reported the current victims holding would suit (refusals
        carry those workers' constraint masks), then the oldest task of each of the oldest other constraint
        masks: the first tasks of the queue often share a mask that no victim's worker has.
        """
        k = self.preempt_candidates
        items = []
        if self._victim_masks:
            victims = set(self.fair.victims(u, usage))
            held = [m for (v, _), m in self._victim_masks.items() if v in victims]
            if held:
                items = q.pop_heads_fitting_any(np.unique(np.concatenate(held)), k // 2)
        items.extend(q.pop_heads(k - len(items)))
        items.sort(key=lambda it: it[0])
        return items

    def _requeue(self, entries: list[tuple], front: bool, now: float) -> None:
        """Tasks come back to the GM: place them if the view allows, else queue them (head or tail)."""
        rest = [e for e in entries if not self._place(e, now)]
        if front:
            for e in reversed(rest):
                self.queue.push_front(e)
        else:
            for e in rest:
                self.queue.push_back(e)

    def _on_preempt_reply(self, msg: PreemptReply, now: float) -> None:
        if self.fair is not None and msg.usage is not None:
            self.lm_usage[msg.lm] = msg.usage
        self._ack(msg.lm, msg.acked)
        entries, victims, lms = self.preempting.pop(msg.request)
        if msg.victim_masks is not None:
            self._victim_masks[(victims[0], msg.lm)] = msg.victim_masks
        if msg.ok:
            self.counters["preemptions_granted"] += 1
            self._fair_backoff = self.fair_period
            self._fair_not_before = 0.0
            for e in entries:
                if e[E_TASK] == msg.task:
                    self._start_usage(e)
            gained = self._apply_truth(msg.delta_workers, msg.delta_state)
            self._requeue([x for x in entries if x[E_TASK] != msg.task], True, now)
            for w in gained:
                self._offer(w, now)
            # the user may still be under its share: go on at once (each success shrinks a shortfall, so this ends)
            self._fair_retry(now)
            self._flush(now)
            return
        elif not self._try_preempt(entries, victims, lms, now):
            gained = self._apply_truth(msg.delta_workers, msg.delta_state)
            self._requeue(entries, False, now)  # Algorithm 2: reinsert in the user's queue
            # nobody could be preempted for these tasks: try less often until something succeeds
            self._fair_not_before = now + self.fair_period  # not on every LM's update: once per period
            self._fair_backoff = min(2 * self._fair_backoff, 64 * self.fair_period)
            self._arm_fair()
            for w in gained:
                self._offer(w, now)
            self._flush(now)
            return
        for w in self._apply_truth(msg.delta_workers, msg.delta_state):
            self._offer(w, now)
        self._flush(now)

    def _on_preempted(self, msg: Preempted, now: float) -> None:
        self._ack(msg.lm, msg.acked)  # the launch of a preempted task may not be acknowledged yet
        if msg.entries is not None:  # lost with a failed worker: placed again first
            for e in msg.entries:
                self._end_usage(e[E_TASK])
            self.counters["tasks_requeued_after_worker_failure"] += len(msg.entries)
            self._requeue(msg.entries, True, now)
            self._flush(now)
            return
        back = []
        for t in _as_list(msg.tasks):
            e = self._end_usage(t)
            if e is None:
                raise RuntimeError(f"{self.address}: preempted task {t} is not one of this GM's running tasks")
            back.append(e)
            self.counters["tasks_requeued_after_preemption"] += 1
        self._requeue(back, True, now)
        self._flush(now)

    # --- high availability -------------------------------------------------------------------------------
    def successor(self) -> GlobalMaster:
        """A new GM at the same address that rebuilds its view from the LMs (the GM is stateless).

        Only the work handed to this GM carries over — its queued tasks and its unacknowledged requests, as a
        client would resubmit them; the view starts empty and is rebuilt from full LM snapshots.
        """
        new = GlobalMaster(
            self.g,
            self.layout,
            self.rec,
            self.policy,
            self.batch_size,
            self.repartition,
            self.fair,
            self.job_user,
            self.preemption,
            fresh_view=False,
            preempt_candidates=self.preempt_candidates,
            fair_period=self.fair_period,
            queue=self.queue_kind,
            partition_order=self.partition_order,
            reject=self.reject,
            matching=self.matching,
            full_pull=self.full_pull,
            handoff_after=self.handoff_after,
            handoff_rare=self.handoff_rare,
            pull_overwrites=self.pull_overwrites,
        )
        new.queue = self.queue
        # request ids continue (as a restarted GM would from the ids its LMs acknowledge in their snapshots): a
        # reused id would be taken as acknowledged by an LM's earlier progress and its rejections lost
        new.req_seq = self.req_seq
        new.unacked = self.unacked
        new.unacked_by_lm = self.unacked_by_lm
        new.running = self.running
        new.preempting = self.preempting
        for _, workers, dem, _, _ in self.unacked.values():  # keep reservations of requests still in flight
            if self.resource_mode:
                np.add.at(new.view.inflight, np.asarray(workers, dtype=np.int64), dem)
            else:
                for w in workers:
                    new.view.inflight[w] += 1
        if self.fair is not None:
            new.own_usage = self.own_usage
        return new
