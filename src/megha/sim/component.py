"""The sans-I/O component contract shared by the simulator and the live runtime.

A scheduler component (a GM, an LM, a Sparrow scheduler, a worker pool …) is a plain object:

* it receives messages with :meth:`Component.on_message` and timers with :meth:`Component.on_timer`,
  each time with the current time ``now`` passed in;
* it acts only through its :class:`Port` — ``send`` a message to an address, ``set_timer``/``cancel_timer``
  — and draws randomness only from ``port.rng``, a seeded :class:`numpy.random.Generator`;
* it never reads a clock, sleeps, or opens a socket.

The simulator's port pushes onto a virtual-time event heap; the live runtime's port writes to a broker;
a test's :class:`RecordingPort` just records what was sent, so a component can be driven by hand-written
messages.

The simulator's port also offers :class:`SimHooks`, optional speed hooks for a component that models a co-located
part of itself in-process (an LM's workers, an RM's node managers): absolute-time timers, message counts without a
message, and a :class:`TimerQueue` for timers with a handler of the component's own. Look them up with
``getattr(port, name, None)`` and fall back to the :class:`Port` contract when they are absent (the live runtime,
a :class:`RecordingPort`); never reach past them into the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from megha.sim.engine import DelayModel, ProcessingModel

Address = str


class Port(Protocol):
    """What a component can do to the outside world."""

    rng: np.random.Generator

    def send(self, dst: Address, msg: Any) -> None:
        """Send ``msg`` to the component at ``dst``."""

    def set_timer(self, delay: float, key: Hashable) -> int:
        """Call ``on_timer(key, now)`` after ``delay`` seconds; returns a handle for :meth:`cancel_timer`."""

    def cancel_timer(self, handle: int) -> None:
        """Cancel a pending timer (no effect if it already fired)."""


class TimerQueue(NamedTuple):
    """The simulator's event queue, for a component's in-process timers (:meth:`SimHooks.timer_queue`).

    An entry is ``(at, next_seq(), handler, payload)`` pushed with ``heapq.heappush(heap, entry)``: at simulated
    time ``at`` (≥ now) the engine calls ``handler(payload, at)`` — the same event ``set_timer_at`` would make,
    in the same place of the order (events run by time, then by ``next_seq`` order), minus a Python call and with
    the component's own handler instead of ``on_timer``. Rules:

    * ``handler`` is a bound method of the component itself whose name does not start with ``on_message``, so that
      the engine can move the entry when the component is suspended, resumed or replaced (it rebinds the handler by
      name on the new component, or to ``on_timer`` when that has no such method: ``on_timer`` must then accept
      ``payload`` as a key);
    * ``next_seq()`` is called exactly once per entry (its value is also the entry's timer handle);
    * the heap is shared with every component and is never rebound: keep it, do not reorder or pop it.
    """

    #: the engine's event heap (a list ordered by :mod:`heapq`)
    heap: list
    #: the engine's event counter: the second field of every entry
    next_seq: Callable[[], int]


def timer_queue_of(port: Port) -> TimerQueue:
    """The port's :class:`TimerQueue` (:meth:`SimHooks.timer_queue`), or ``TimerQueue(None, None)`` on a port
    without it (the live runtime, a :class:`RecordingPort`): the one lookup every in-process timer path makes."""
    tq = getattr(port, "timer_queue", None)
    return tq() if tq is not None else TimerQueue(None, None)


class SimHooks(Protocol):
    """Simulator-only speed hooks of :class:`megha.sim.engine.SimPort`, beyond the :class:`Port` contract.

    For components that model an exchange in-process (workers co-located with their master) and must hit exactly
    the instants and message counts of the multi-component form. None of it exists on the live runtime's port or a
    :class:`RecordingPort`: test with ``getattr(port, "timer_queue", None)`` and keep the plain-port path.
    """

    def set_timer_at(self, at: float, key: Hashable) -> int:
        """Call ``on_timer(key, at)`` at the absolute simulated time ``at`` (≥ now); returns a timer handle."""

    def count_message(self, cls: type, n: int = 1) -> None:
        """Count ``n`` messages of type ``cls`` in the run's message counts without sending them."""

    def message_counter(self, cls: type) -> list:
        """The run's count cell for messages of type ``cls``: ``cell[0] += n`` is :meth:`count_message` without
        the call (keep the cell for the run)."""

    def timer_queue(self) -> TimerQueue:
        """The event queue for timers with a handler of the component's own (see :class:`TimerQueue`); the same
        object for the whole run, so take it once (in ``attach`` or ``on_start``)."""

    def route(self, dst: Address, name: str, cls: type) -> tuple | bool:
        """A direct delivery to handler ``name`` of the component at ``dst`` for what would be a message of type
        ``cls``: ``(append, handler, delay, next_seq, count_cell, add_comm_one)``, or False when the link cannot
        take one (then :meth:`Port.send`). The component queues ``append((now + delay, next_seq(), handler,
        payload))`` with a payload of the receiver's choosing, counts it with ``count_cell[0] += 1`` and, when
        ``add_comm_one`` is not None, reports its one task's latency with ``add_comm_one(task, delay)``: exactly the
        event ``send`` would have queued, without the message object. ``name`` starts with ``on_message`` and is a
        public, documented handler of the receiver (Megha's ``on_message_launch``, ``on_message_done``,
        ``on_message_delta``)."""

    #: :meth:`route`'s answers by ``(dst, name)``: look a route up here on every use (``routes.get(key)``), call
    #: :meth:`route` on a miss. The same dict for the whole run (keep it from ``attach``); the engine empties it
    #: when a component is replaced, suspended or resumed.
    routes: dict


class Host(Protocol):
    """What a scheduler's builder and its fault models may ask of the simulator that runs its components.

    :class:`megha.sim.engine.Engine` implements it; a builder sees it as ``BuildContext.host`` (and adds components
    through ``BuildContext.add``). Components themselves never see it: they act only through their :class:`Port`.
    Fault models use the rest — taking a component down and back (:meth:`suspend`, :meth:`resume`), replacing it
    by a fresh process (:meth:`replace`, plus :meth:`next_handle` / :meth:`pending_timers` / :meth:`cancel_timer`
    to drop the old process's timers), delivering an external input (:meth:`inject`)."""

    #: the current simulated time (seconds)
    now: float
    #: the components by address (read only: change them with add / replace / suspend / resume)
    components: Mapping[Address, Any]
    #: one-way delays between component kinds (:class:`megha.sim.engine.DelayModel`)
    delay_model: DelayModel
    #: the processing-cost model, or None when components run in zero time
    processing: ProcessingModel | None

    def add(self, comp: Component) -> Component:
        """Register a component (it gets its port and its own random stream, named by its address)."""

    def replace(self, comp: Component) -> Component:
        """Put a new component at an existing address; messages in flight go to it."""

    def suspend(self, address: Address) -> None:
        """Take a component down (a crash): what is addressed to it is held until :meth:`resume`."""

    def resume(self, address: Address) -> int:
        """Bring a suspended component back; returns how many held events reach it."""

    def is_down(self, address: Address) -> bool:
        """Whether the component at ``address`` is suspended."""

    def inject(self, at: float, dst: Address, msg: Any) -> None:
        """Deliver ``msg`` to ``dst`` at time ``at`` without network delay (an external input)."""

    def cancel_timer(self, handle: int) -> None:
        """Cancel a pending timer by handle."""

    def next_handle(self) -> int:
        """A handle greater than every handle given so far."""

    def pending_timers(self) -> list[tuple[int, Component]]:
        """``(handle, component)`` of every pending timer."""


class Component:
    """Base class of sans-I/O components. Subclasses set ``kind`` (used by delay and cost models)."""

    kind: str = "component"

    def __init__(self, address: Address) -> None:
        self.address = address
        self.port: Port = _UnattachedPort()

    @property
    def crash_kind(self) -> str | None:
        """The fault kind under which a fault schedule crashes this component (``megha simulate --faults``): its
        ``kind`` unless a subclass sets ``crash_kind = None`` (a pool standing for many workers, which fail one by
        one through a family's ``worker`` faults) or another name."""
        return self.kind

    def attach(self, port: Port) -> None:
        """Give the component its port (done by the engine or the live runtime)."""
        self.port = port

    def on_start(self, now: float) -> None:
        """Called once when the run starts (set initial timers here)."""

    def on_recover(self, now: float) -> None:
        """Called when the component comes back after a crash (fault injection), before the messages and timers
        held while it was down reach it. The default keeps its state: a restart from replicated or persisted
        state (an LM's standby, a master's log). A component that would lose state drops it here (Megha's
        stateless GM rebuilds its view from its LMs)."""

    def on_message(self, msg: Any, now: float) -> None:
        """Handle a message delivered at ``now`` (every component that receives messages overrides it)."""
        raise NotImplementedError(f"{type(self).__name__} does not handle {type(msg).__name__}")

    def on_timer(self, key: Hashable, now: float) -> None:
        """Handle the timer ``key`` set with ``port.set_timer``, fired at ``now`` (overridden by components with
        timers)."""
        raise NotImplementedError(f"{type(self).__name__} has no timers")


class _UnattachedPort:
    rng = np.random.default_rng(0)

    def send(self, dst: Address, msg: Any) -> None:
        raise RuntimeError("component is not attached to an engine or runtime")

    def set_timer(self, delay: float, key: Hashable) -> int:
        raise RuntimeError("component is not attached to an engine or runtime")

    def cancel_timer(self, handle: int) -> None:
        raise RuntimeError("component is not attached to an engine or runtime")


class RecordingPort:
    """A port for unit tests: records sends and timers instead of delivering them."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.sent: list[tuple[Address, Any]] = []
        self.timers: dict[int, tuple[float, Hashable]] = {}
        self._next = 0

    def send(self, dst: Address, msg: Any) -> None:
        """Record ``msg`` as sent to ``dst`` (see :meth:`take`)."""
        self.sent.append((dst, msg))

    def set_timer(self, delay: float, key: Hashable) -> int:
        """Record a timer of ``key`` due in ``delay`` seconds; returns its handle."""
        self._next += 1
        self.timers[self._next] = (delay, key)
        return self._next

    def cancel_timer(self, handle: int) -> None:
        """Forget the recorded timer ``handle`` (no error if it is gone)."""
        self.timers.pop(handle, None)

    def take(self, kind: type | None = None) -> list[tuple[Address, Any]]:
        """Pop the recorded sends (only those whose message is of ``kind`` if given)."""
        if kind is None:
            out, self.sent = self.sent, []
            return out
        out = [(d, m) for d, m in self.sent if isinstance(m, kind)]
        self.sent = [(d, m) for d, m in self.sent if not isinstance(m, kind)]
        return out
