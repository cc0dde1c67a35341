"""The discrete-event engine: a virtual clock, a heap of events, and ports for components.

Ordering is deterministic: events run by time, then by insertion order. Messages sent with the model's default
network delay (most of them) go to a FIFO lane instead of the heap: sent at a non-decreasing clock with one
constant delay, they arrive in the order they were sent, so the lane is already sorted and the next event is the
earlier of the lane's head and the heap's top — the same order, without a heap operation for most messages.
Timers (and messages on links with a delay of their own) take the heap: popping it costs about log2(pending) tuple
comparisons, so with thousands pending a timer costs more than a lane message. Every component gets its own
:class:`numpy.random.Generator`, the stream named by its address under the engine's seed
(:func:`megha.sim.seeding.named_stream`), so the same configuration and seed give the same results and adding a
component changes no other component's random numbers.

Message latency comes from a :class:`DelayModel` (a constant one-way network delay, default 0.5 ms, with
per-link overrides by component kind). An optional :class:`ProcessingModel` gives each message a
processing cost at the receiver: a component handles one message at a time, so messages queue behind a
busy component (framework queuing) and everything it sends leaves after the cost (processing delay).
"""

from __future__ import annotations

import functools
import gc
import heapq
import itertools
import math
import operator
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from megha.sim.component import Address, Component, TimerQueue
from megha.sim.seeding import named_stream

# An event is (time, sequence number, handler, payload): the handler is the receiving component's bound
# ``on_message`` or ``on_timer``; the sequence number breaks ties in insertion order and is a timer's handle.
_heappush = heapq.heappush
_GC_GEN0 = 100_000  # allocations between young-generation collections while running
_CHUNK = 1 << 16  # events the lean loop runs between its bookkeeping when no progress report is asked for


@dataclass
class DelayModel:
    """One-way message latency: ``network_delay`` seconds, or a per-(sender kind, receiver kind) override."""

    network_delay: float = 0.0005
    links: dict[tuple[str, str], float] = field(default_factory=dict)

    def delay(self, src_kind: str, dst_kind: str) -> float:
        """The one-way delay from a component of kind ``src_kind`` to one of kind ``dst_kind``: the link's own, else
        a wildcard link's (``(src, "*")``, then ``("*", dst)``), else ``network_delay``."""
        d = self.links.get((src_kind, dst_kind))
        if d is None:
            d = self.links.get((src_kind, "*"), self.links.get(("*", dst_kind), self.network_delay))
        return d


class DelayRecorder(Protocol):
    """What the engine reports to a run's recorder, when it has one: the modelled delays on the tasks' allocation
    path (:class:`megha.metrics.recorder.Recorder` has both; the engine does not import it)."""

    def add_comm(self, ids: list[int] | np.ndarray, d: float) -> None:
        """Communication delay ``d`` of a message carrying tasks ``ids`` (its ``alloc_tasks``)."""

    def add_proc(self, ids: list[int] | np.ndarray, d: float) -> None:
        """Processing delay ``d`` of a message carrying tasks ``ids``."""


@dataclass
class ProcessingModel:
    """Per-message processing cost at the receiver: ``base[kind] + per_item[kind] × len(msg)`` seconds."""

    base: dict[str, float] = field(default_factory=dict)
    per_item: dict[str, float] = field(default_factory=dict)

    def cost(self, kind: str, msg: Any) -> float:
        """The processing time a component of kind ``kind`` spends on ``msg``: its base cost plus its per-item cost
        times the message's length."""
        c = self.base.get(kind, 0.0)
        k = self.per_item.get(kind, 0.0)
        if k:
            c += k * _msg_len(msg)
        return c

    @property
    def active(self) -> bool:
        """Whether any kind has a non-zero cost (otherwise components run in zero time)."""
        return any(self.base.values()) or any(self.per_item.values())


def _msg_len(msg: Any) -> int:
    try:
        return len(msg)
    except TypeError:
        return 1


class SimPort:
    """The simulator's port for one component: the :class:`~megha.sim.component.Port` contract plus the
    simulator-only :class:`~megha.sim.component.SimHooks` (``set_timer_at``, ``count_message``,
    ``message_counter``, ``timer_queue``, :meth:`route` and its cache :attr:`routes`). Components use nothing else
    of it (its other attributes are the engine's)."""

    __slots__ = (
        "_delays",
        "_heap",
        "_lane",
        "_lane_append",
        "_links",
        "_next",
        "_on_timer",
        "_plain",
        "_routes",
        "_seq",
        "_types",
        "comp",
        "engine",
        "rng",
    )

    def __init__(self, engine: Engine, comp: Component, rng: np.random.Generator) -> None:
        self.engine = engine
        self.comp = comp
        self.rng = rng
        self._delays: dict[Address, tuple[Component, float, bool]] = {}
        self._links: dict[Address, tuple[Callable, Callable, float]] = {}  # see _LeanPort
        self._plain = engine._plain
        self._routes: dict[tuple[Address, str], tuple | bool] = {}  # see route(); emptied when a target changes
        self._heap = engine._heap  # never rebound (Engine.replace edits it in place)
        self._lane = engine._lane
        self._lane_append = engine._lane.append
        self._types = engine._types
        self._seq = engine._seq
        self._next = engine._seq.__next__
        self._on_timer = comp.on_timer

    def _resolve(self, dst: Address) -> tuple:
        e = self.engine
        target = e.components.get(dst)
        if target is None:
            raise KeyError(f"{self.comp.address} sent a message to unknown address {dst!r}")
        d = e.delay_model.delay(self.comp.kind, target.kind)
        hit = self._delays[dst] = (target.on_message, d, d == e._lane_delay)
        if e.processing is None:
            self._links[dst] = (self._lane_append if hit[2] else e._heap_push, hit[0], d)
        return hit

    def _type_info(self, cls: type) -> list:
        e = self.engine
        info = self._types[cls] = [0, e.recorder is not None and hasattr(cls, "alloc_tasks")]
        if not info[1]:
            e._plain[cls] = info
        return info

    def send(self, dst: Address, msg: Any) -> None:
        """Deliver ``msg`` to ``dst`` after the link's one-way delay, counted by message type (an unknown address is
        a ``KeyError``)."""
        hit = self._delays.get(dst)
        if hit is None:
            if dst not in self.engine.components:
                raise KeyError(f"{self.comp.address} sent {type(msg).__name__} to unknown address {dst!r}")
            hit = self._resolve(dst)
        handler, d, in_lane = hit
        info = self._types.get(type(msg))
        if info is None:
            info = self._type_info(type(msg))
        info[0] += 1
        if info[1]:
            ids = msg.alloc_tasks
            if ids is not None:
                self.engine.recorder.add_comm(ids, d)
        if in_lane:
            self._lane_append((self.engine.now + d, self._next(), handler, msg))
        else:
            e = self.engine
            _heappush(self._heap, (e.now + d + e._send_offset, self._next(), handler, msg))

    def route(self, dst: Address, name: str, cls: type) -> tuple | bool:
        """Simulator-only: a direct delivery of messages of type ``cls`` to ``dst``'s handler ``name``.

        Returns ``(append, handler, delay, next_seq, count_cell, add_comm_one)`` — the component then delivers a
        payload of its own (not a ``cls`` object) as ``append((now + delay, next_seq(), handler, payload))``,
        counts it with ``count_cell[0] += 1`` and, when ``add_comm_one`` is not None, reports the message's latency
        for its one task with ``add_comm_one(task, delay)`` (what :meth:`send` does for a message with
        ``alloc_tasks``) — exactly the event :meth:`send` would have queued, in the same place of the order,
        without the message object and the receiver's type dispatch. False when the link does not take the
        default-delay lane (a per-link delay or a processing model) or ``dst`` has no handler ``name``: then use
        :meth:`send`. Names of such handlers start with ``on_message`` (the engine tells them from timers by it).
        Answers are cached in ``self._routes`` under ``(dst, name)``, which the engine empties whenever a component
        is replaced, suspended or resumed: look the route up there on every use. A family may queue a callable of
        its own in place of ``handler`` (same delay and sequence number, so the same place in the order) when it
        looks its receivers up when it runs, as MACRM's one-event multicast does
        (:mod:`megha.schedulers.macrm.multicast`): the engine retargets only bound ``on_message`` handlers.
        """
        key = (dst, name)
        got = self._routes.get(key)
        if got is not None:
            return got
        hit = self._delays.get(dst)
        if hit is None:
            hit = self._resolve(dst)
        _, d, in_lane = hit
        target = self.engine.components[dst]
        handler = getattr(target, name, None)
        if not in_lane or handler is None:
            got = False
        else:
            info = self._types.get(cls) or self._type_info(cls)
            comm = None
            if info[1]:
                rec = self.engine.recorder
                comm = getattr(rec, "add_comm_one", None) or (lambda t, d, rec=rec: rec.add_comm([t], d))
            got = (self._lane_append, handler, d, self._next, info, comm)
        self._routes[key] = got
        return got

    @property
    def routes(self) -> dict[tuple[Address, str], tuple | bool]:
        """The cache of :meth:`route`'s answers by ``(dst, name)`` (see :attr:`SimHooks.routes`). Simulator-only."""
        return self._routes

    def set_timer(self, delay: float, key: Hashable) -> int:
        """Fire ``on_timer(key)`` of this component ``delay`` (>= 0) seconds from now; returns the timer's handle."""
        if not delay >= 0:  # negative or NaN
            raise ValueError(f"{self.comp.address}: timer delay must be >= 0, got {delay}")
        e = self.engine
        tid = self._next()
        _heappush(self._heap, (e.now + e._send_offset + delay, tid, self._on_timer, key))
        return tid

    def set_timer_at(self, at: float, key: Hashable) -> int:
        """Fire ``on_timer(key)`` at the absolute simulated time ``at`` (≥ now); returns a handle.

        Simulator-only (not part of the :class:`~megha.sim.component.Port` contract): a component that
        models a co-located part of itself (e.g. Megha's LM running its workers in-process) uses it to hit
        exactly the instant a separate component's timer or message would have had.
        """
        if not at >= self.engine.now:
            raise ValueError(f"{self.comp.address}: timer at {at} is before now ({self.engine.now})")
        tid = self._next()
        heapq.heappush(self._heap, (at, tid, self._on_timer, key))
        return tid

    def count_message(self, cls: type, n: int = 1) -> None:
        """Count ``n`` messages of type ``cls`` in :meth:`Engine.message_counts` without sending them.

        Simulator-only, for components that model a message exchange in-process (the latency and the
        ``alloc_tasks`` communication delay are then the component's business).
        """
        info = self._types.get(cls)
        if info is None:
            info = self._type_info(cls)
        info[0] += n

    def message_counter(self, cls: type) -> list:
        """The engine's count cell for messages of type ``cls`` (``cell[0] += n`` is :meth:`count_message`).

        Simulator-only, for components that count a modelled message on their hot path without a call.
        """
        info = self._types.get(cls)
        if info is None:
            info = self._type_info(cls)
        return info

    def timer_queue(self) -> TimerQueue:
        """The event queue for a component's in-process timers with its own handler (the contract:
        :class:`~megha.sim.component.TimerQueue`, :class:`~megha.sim.component.SimHooks`). Simulator-only."""
        return TimerQueue(self._heap, self._next)

    def cancel_timer(self, handle: int) -> None:
        """Cancel the timer ``handle`` (a timer that already fired is ignored)."""
        self.engine._cancelled.add(handle)


class _LeanPort(SimPort):
    """The port of an engine without a processing model, where nothing is ever sent or set at an offset from now:
    :meth:`send` takes a cached link of ``self._links`` (``(push onto the lane or the heap, handler, delay)``,
    filled by :meth:`_resolve`) for a message type of ``self._plain`` (the count cells of the types whose latency
    the recorder does not take) by itself — the event :meth:`SimPort.send` queues, in fewer steps — and
    :meth:`set_timer` leaves the (zero) offset out."""

    __slots__ = ()

    def send(self, dst: Address, msg: Any) -> None:
        link = self._links.get(dst)
        cell = self._plain.get(type(msg))
        if link is None or cell is None:
            SimPort.send(self, dst, msg)
            return
        cell[0] += 1
        push, handler, d = link
        push((self.engine.now + d, next(self._seq), handler, msg))  # next(): cheaper than calling count.__next__

    def set_timer(self, delay: float, key: Hashable) -> int:
        if not delay >= 0:  # negative or NaN
            raise ValueError(f"{self.comp.address}: timer delay must be >= 0, got {delay}")
        tid = next(self._seq)
        _heappush(self._heap, (self.engine.now + delay, tid, self._on_timer, key))
        return tid


class Engine:
    """A deterministic discrete-event loop over sans-I/O components."""

    def __init__(
        self,
        seed: int = 0,
        delay_model: DelayModel | None = None,
        processing: ProcessingModel | None = None,
        recorder: DelayRecorder | None = None,
    ) -> None:
        self.now = 0.0
        self.delay_model = delay_model or DelayModel()
        self.processing = processing if processing is not None and processing.active else None
        self.recorder = recorder
        self.components: dict[Address, Component] = {}
        self._types: dict[type, list] = {}  # message type -> [count sent, carries alloc_tasks]
        self._plain: dict[type, list] = {}  # the entries of _types that do not carry alloc_tasks (see _LeanPort)
        self.events = 0
        self._heap: list[tuple] = []
        # messages with the default network delay, in send order (= time order); off with a processing model,
        # whose send offsets would break that order
        self._lane: deque[tuple] = deque()
        self._lane_delay = self.delay_model.network_delay if self.processing is None else math.nan
        self._heap_push = functools.partial(_heappush, self._heap)
        self._seq = itertools.count()
        self._cancelled: set[int] = set()
        self._send_offset = 0.0
        self._busy_until: dict[Address, float] = {}
        self.seed = int(seed)
        self._started = False
        self._stopping = False
        self._chunk: Iterator[None] | None = None  # the lean loop's running chunk (see _run)
        self._stop_left = 0  # the items of that chunk stop() took away

    def stop(self) -> None:
        """Stop :meth:`run` after the current event (e.g. when every task is done)."""
        self._stopping = True
        chunk = self._chunk
        if chunk is not None:  # empty the running chunk: its loop ends after this event (see _run)
            left = operator.length_hint(chunk)
            if left:
                self._stop_left = left
                deque(chunk, maxlen=0)

    def add(self, comp: Component) -> Component:
        """Register a component; it gets a port and its own random generator (the stream named by its address)."""
        if comp.address in self.components:
            raise ValueError(f"duplicate component address {comp.address!r}")
        port = SimPort if self.processing is not None else _LeanPort
        comp.attach(port(self, comp, named_stream(self.seed, comp.address)))
        self.components[comp.address] = comp
        if self._started:
            comp.on_start(self.now)
        return comp

    def replace(self, comp: Component) -> Component:
        """Swap in a new component at an existing address (e.g. a restarted GM); pending messages go to it."""
        old = self.components.pop(comp.address)
        self.add(comp)
        self._retarget(old, comp)  # in place: run() and the ports hold references to the heap and the lane
        return comp

    def suspend(self, address: Address) -> None:
        """Take the component at ``address`` down (a crash): until :meth:`resume`, messages and timers addressed
        to it are held, in order, instead of run. Rare (fault injection), so it may rewrite the event queues."""
        comp = self.components[address]
        if isinstance(comp, _Down):
            return
        down = _Down(comp)
        self.components[address] = down
        self._retarget(comp, down)

    def resume(self, address: Address) -> int:
        """Bring a suspended component back: its :meth:`~megha.sim.component.Component.on_recover` runs first,
        then what was held reaches it now, in the order it arrived. Returns how many events were held."""
        down = self.components[address]
        if not isinstance(down, _Down):
            return 0
        comp = down.comp
        self.components[address] = comp
        self._retarget(down, comp)
        comp.on_recover(self.now)
        for handler_name, payload in down.held:
            heapq.heappush(self._heap, (self.now, next(self._seq), getattr(comp, handler_name), payload))
        return len(down.held)

    def is_down(self, address: Address) -> bool:
        """Whether the component at ``address`` is suspended."""
        return isinstance(self.components.get(address), _Down)

    def _retarget(self, old: Component, new: Component) -> None:
        """Point every pending event and every port's cached target at ``new`` instead of ``old``."""
        for c in self.components.values():
            port = c.port
            if isinstance(port, SimPort):
                port._delays.pop(old.address, None)
                port._routes.clear()
                port._links.pop(old.address, None)

        def rebind(h: Callable) -> Callable:
            if getattr(h, "__self__", None) is not old:
                return h
            # a component may give the engine a timer handler of its own (e.g. SimLocalMaster's task ends) or a
            # message handler a sender routes to directly (SimPort.route); a stand-in without it (a crashed
            # component's _Down) holds a message for that handler, and gets a timer through on_timer
            name = h.__name__
            got = getattr(new, name, None)
            if got is not None:
                return got
            if isinstance(new, _Down) and name.startswith("on_message"):
                return _Hold(new, name)
            return new.on_timer

        self._heap[:] = [(t, s, rebind(h), p) for (t, s, h, p) in self._heap]
        heapq.heapify(self._heap)
        lane = [(t, s, rebind(h), p) for (t, s, h, p) in self._lane]
        self._lane.clear()
        self._lane.extend(lane)

    def inject(self, at: float, dst: Address, msg: Any) -> None:
        """Deliver ``msg`` to ``dst`` at time ``at`` (no network delay) — used for external inputs."""
        heapq.heappush(self._heap, (at, next(self._seq), self.components[dst].on_message, msg))

    def call_at(self, at: float, comp: Component, key: Hashable) -> None:
        """Fire ``comp.on_timer(key)`` at absolute time ``at``."""
        heapq.heappush(self._heap, (at, next(self._seq), comp.on_timer, key))

    @property
    def pending(self) -> int:
        """Events waiting to run (messages in flight and timers, cancelled timers included)."""
        return len(self._heap) + len(self._lane)

    def cancel_timer(self, handle: int) -> None:
        """Cancel a pending timer by its handle (no effect if it already fired)."""
        self._cancelled.add(handle)

    def next_handle(self) -> int:
        """A handle greater than every handle given so far: timers set from now on have larger ones."""
        return next(self._seq)

    def pending_timers(self) -> list[tuple[int, Component]]:
        """``(handle, component)`` of every timer still pending (cancelled ones included), for fault models that
        cancel the timers of a process they replace."""
        return [(seq, h.__self__) for _, seq, h, _ in self._heap if not h.__name__.startswith("on_message")]

    def run(
        self,
        until: float = math.inf,
        progress: Callable[[float], None] | None = None,
        progress_every: int = 1 << 15,
    ) -> float:
        """Run events with time ≤ ``until``; returns the time of the last event processed.

        The cyclic garbage collector runs less often meanwhile (a run allocates millions of short-lived tuples
        and messages, and collections cost ~7% of a large run); the previous thresholds are restored after.
        """
        old = gc.get_threshold()
        if old[0] and old[0] < _GC_GEN0:
            gc.set_threshold(_GC_GEN0, *old[1:])
        try:
            return self._run(until, progress, progress_every)
        finally:
            self._chunk = None
            gc.set_threshold(*old)

    def _run(self, until: float, progress: Callable[[float], None] | None, progress_every: int) -> float:
        if not self._started:
            self._started = True
            for comp in list(self.components.values()):
                comp.on_start(self.now)
        n = self.events
        self._stopping = False
        if self.processing is None:
            # the common case, kept lean: no processing model, so no busy components and no send offset. Events run
            # in chunks (up to the next progress report): a chunk is an iterator the loop takes one item of per event,
            # so the loop neither counts events nor tests the stop flag — stop() empties the chunk instead.
            drain = self._drain if until == math.inf else self._drain_until
            next_progress = n + progress_every if progress is not None else -1
            while True:
                size = next_progress - n if progress is not None else _CHUNK
                chunk = self._chunk = itertools.repeat(None, size)
                self._stop_left = 0
                skipped, dry = drain(chunk, until)
                taken = size - self._stop_left - operator.length_hint(chunk)
                n += taken - skipped - dry  # the item a dry chunk ended on ran no event
                if progress is not None and n >= next_progress:
                    self.events = n
                    progress(self.now)
                    next_progress = n + progress_every
                if dry or self._stopping:
                    break
            self.events = n
            return self.now
        heap = self._heap
        pop = heapq.heappop
        cancelled = self._cancelled
        proc = self.processing
        next_progress = n + progress_every if progress is not None else math.inf
        busy = self._busy_until
        rec = self.recorder
        while heap and not self._stopping:
            item = heap[0]
            t = item[0]
            if t > until:
                break
            pop(heap)
            _, seq, handler, payload = item
            if cancelled and seq in cancelled:
                cancelled.discard(seq)
                continue
            if handler.__name__ == "on_message":
                comp = handler.__self__
                free_at = busy.get(comp.address, 0.0)
                if free_at > t:  # the component is busy: the message waits its turn
                    heapq.heappush(heap, (free_at, seq, handler, payload))
                    continue
                cost = proc.cost(comp.kind, payload)
                busy[comp.address] = t + cost
                self._send_offset = cost
                if cost and rec is not None:
                    ids = payload.alloc_tasks if hasattr(payload, "alloc_tasks") else None
                    if ids is not None:
                        rec.add_proc(ids, cost)
            self.now = t
            n += 1
            handler(payload, t)
            self._send_offset = 0.0
            if n >= next_progress:
                self.events = n
                progress(t)
                next_progress = n + progress_every
        self.events = n
        return self.now

    def _drain(self, chunk: Iterator[None], until: float) -> tuple[int, bool]:
        """Run one event per item of ``chunk`` (no time limit); returns the cancelled timers skipped (each took an
        item) and whether the queues ran dry (the last item taken then ran no event)."""
        heap = self._heap
        lane = self._lane
        pop = heapq.heappop
        popleft = lane.popleft
        cancelled = self._cancelled
        skipped = 0
        for _ in chunk:
            if heap and (not lane or heap[0] < lane[0]):
                t, seq, handler, payload = pop(heap)
                if cancelled and seq in cancelled:
                    cancelled.discard(seq)
                    skipped += 1
                    continue
            else:
                # a message of the lane: never a cancelled timer (only timers' handles are ever cancelled)
                try:
                    t, _, handler, payload = popleft()
                except IndexError:  # the lane is empty too
                    return skipped, True
            self.now = t
            handler(payload, t)
        return skipped, False

    def _drain_until(self, chunk: Iterator[None], until: float) -> tuple[int, bool]:
        """:meth:`_drain` for events with time ≤ ``until``: the queues count as dry at the first later event."""
        heap = self._heap
        lane = self._lane
        pop = heapq.heappop
        popleft = lane.popleft
        cancelled = self._cancelled
        skipped = 0
        for _ in chunk:
            if heap and (not lane or heap[0] < lane[0]):
                if heap[0][0] > until:
                    return skipped, True
                t, seq, handler, payload = pop(heap)
                if cancelled and seq in cancelled:
                    cancelled.discard(seq)
                    skipped += 1
                    continue
            elif lane:
                if lane[0][0] > until:
                    return skipped, True
                t, _, handler, payload = popleft()
            else:
                return skipped, True
            self.now = t
            handler(payload, t)
        return skipped, False

    def message_counts(self) -> dict[str, int]:
        """Messages sent, by message type name."""
        return {cls.__name__: info[0] for cls, info in sorted(self._types.items(), key=lambda kv: kv[0].__name__)}


class _Down(Component):
    """Stands at a crashed component's address while it is down and holds what reaches it (see
    :meth:`Engine.suspend`). It keeps the component's port, so timers it set are the ones held."""

    def __init__(self, comp: Component) -> None:
        super().__init__(comp.address)
        self.kind = comp.kind
        self.comp = comp
        self.port = comp.port
        self.held: list[tuple[str, Any]] = []

    def on_message(self, msg: Any, now: float) -> None:
        self.held.append(("on_message", msg))

    def on_timer(self, key: Hashable, now: float) -> None:
        self.held.append(("on_timer", key))


class _Hold:
    """A held delivery to a direct message handler (see :meth:`SimPort.route`) of a suspended component: called as
    the handler would be, it keeps the payload in the stand-in's ``held`` for that handler."""

    def __init__(self, down: _Down, name: str) -> None:
        self.__self__ = down
        self.__name__ = name

    def __call__(self, payload: Any, now: float) -> None:
        self.__self__.held.append((self.__name__, payload))
