"""Drive sans-I/O components over a transport, in real time.

A :class:`Runtime` is one service's side of the bus: it hosts components (a GM, an LM, a worker host) at their
logical addresses, gives each a :class:`LivePort` (``send`` → encode + publish, ``set_timer`` → asyncio
``call_later``, an ``rng``: the stream :func:`~megha.sim.seeding.named_stream` names by the seed the component is
hosted with and its address, as the simulator's engine gives it), decodes and checks every incoming envelope, and
calls ``on_message(msg, now)`` with ``now`` = wall-clock seconds (``time.time()``: one clock for every process of a
machine).

**Durable, ordered, exactly-once links.** Every point-to-point message and every task event is published on a
durable subject (the broker keeps it in a JetStream stream; the transport re-publishes it until the broker
acknowledged it), and a component reads its inbox from a stream position, resuming where it stopped after a
reconnection. Each port numbers its messages per destination (``seq``) within its incarnation (``epoch``); a
receiver delivers each ``(src, dst)`` stream in order: it drops what it has seen, holds a message that arrives
before an earlier one (a re-published message can be stored after a later one) until the gap fills — or for
at most ``gap_timeout`` — and drops messages of an older incarnation or a lower ``term`` (a deposed active LM).

**Bad input.** A message that fails decoding or its schema, that is addressed elsewhere, or that the
component's ``validate`` hook rejects (e.g. worker ids outside the LM's range) is logged and counted
(``rejected_messages``); a handler that raises is logged and counted (``handler_errors``); the service stays up.

**Active/standby** (paper §IV-D). A replicated component (an LM) writes every input — messages as delivered,
timer firings, its start, reconnections, takeovers — to its *replication log* (a durable subject) *before*
handling it (:class:`~megha.live.messages.Repl`); a *standby* reads the log from its first record and applies
the same inputs in the same order with the same ``now`` — the components are deterministic, so its state
equals the active's — while its port only records what it would send (same sequence numbers). A standby
started at any time (the supervisor starts a new one after every failover) catches up by reading the whole
log. The active beats on a liveness subject; when it falls silent for ``failover_timeout`` while the standby
is connected, the standby claims the next *term* (compare-and-set in the broker: of several standbys exactly
one wins), re-sends its recent outputs (flagged as re-sent: receivers drop those the active had delivered, and
a receiver that started since drops them all, as they were meant for its predecessor), arms the timers the
component had set and reads the inbox from the position after the last input the active logged. An active
that learns of a higher term (a fence message, or its periodic look at the term) is *deposed*: it stops.
**Fenced log, gated outputs.** The active writes its records in batches (group commit: :class:`ReplBatch`),
each only where the log ends for it (the broker checks the expected last position; a message id makes a
re-published batch count once), and sends the outputs that follow from the records only once the broker stored
them. A standby taking over first writes its own record where the log ends (after applying every record before
it). So an active that only stalled, and wakes up after the takeover, has its next batch refused: it is deposed
before any of its outputs leave; two instances never act as one LM, and whatever anyone saw the old active do
follows from records its successor applied.
While its connection is down a component's timers wait (an LM judges no worker host dead while it cannot hear
them), and after a reconnection it gets a ``resume`` input (an LM gives every host a grace period).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from megha.live import wire
from megha.live.messages import Control, Events, Repl, ReplBatch, Status
from megha.live.transport import Transport, subject_of
from megha.metrics.recorder import TaskIds, WorkerIds
from megha.sim.component import Component
from megha.sim.seeding import named_stream

log = logging.getLogger("megha.live.runtime")

EVENTS = "events"  # task events of client identity k go to EVENTS/k (durable subject N.ev.k)
CLIENT_SHIFT = 52  # = megha.live.worker.CLIENT_SHIFT: client identity of a task id
STATUS = "status"
HOSTS = "hosts"
CONTROL = "control"
CORE = frozenset({STATUS, HOSTS, CONTROL})  # fan-out addresses on core subjects (not kept)
MAX_SNAPSHOT_BATCH = 640 * 1024  # bytes: a replication batch with a snapshot stays under nats-server's 1 MB limit
RING_SNAPSHOT_BYTES = 256 * 1024  # bytes of the latest outputs a snapshot keeps for re-sending
WINDOW_RATE = 1000.0  # tasks per second a coalescing window carries before it starts to grow (see adaptive_window)
EVENT_WINDOW_MAX = 0.04  # s: the longest a non-replicated component's task events wait (at >= 4,000 tasks/s)


def adaptive_window(base: float, most: float, per_second: float) -> float:
    """Length of a coalescing window that carried ``per_second`` tasks per second last time: ``base`` up to
    ``WINDOW_RATE`` tasks per second, then growing with the rate up to ``most`` (at high rates more tasks share one
    message; at moderate ones nothing waits longer than before)."""
    return min(most, max(base, base * per_second / WINDOW_RATE))


def _ids(x: Any) -> list[int]:
    if isinstance(x, list):
        return list(x)
    if isinstance(x, np.ndarray):
        return x.ravel().tolist()
    if isinstance(x, tuple):
        return list(x)
    return [int(x)]


def events_address(client: int) -> str:
    """Address of the task events of client identity ``client``."""
    return f"{EVENTS}/{int(client)}"


def events_by_client(items: list[list]) -> list[tuple[str, list[list]]]:
    """Split event items by the client identity their task ids belong to (each client reads only its own)."""
    first = None
    mixed = False
    for it in items:
        for t in it[2]:
            c = t >> CLIENT_SHIFT
            if first is None:
                first = c
            elif c != first:
                mixed = True
                break
        if mixed:
            break
    if not mixed:
        return [(events_address(first or 0), items)] if items else []
    out: dict[int, list[list]] = {}
    for kind, t, ids, aux, note in items:
        per = len(aux) == len(ids)
        parts: dict[int, list[int]] = {}
        for i, x in enumerate(ids):
            parts.setdefault(x >> CLIENT_SHIFT, []).append(i)
        for c, idx in parts.items():
            out.setdefault(c, []).append(
                [kind, t, [ids[i] for i in idx], [aux[i] for i in idx] if per else list(aux), note]
            )
    return [(events_address(c), v) for c, v in out.items()]


class ForwardingRecorder:
    """The recorder a live component reports to: events are batched and sent to clients.

    Same methods as :class:`~megha.metrics.recorder.TaskRecorder` that components call; allocation-time
    components are measured, not modelled, in the live runtime, so ``add_*`` are no-ops.
    """

    def __init__(self) -> None:
        self.items: list[list] = []
        self.counters: Counter = Counter()
        self.running = 0
        self.outstanding = 0
        self.last_progress = 0.0

    def decided(self, ids: TaskIds, t: float) -> None:
        """The scheduler decided where the tasks go: queued as a ``decided`` event for their clients."""
        self.items.append(["decided", t, _ids(ids), [], ""])

    def started(self, ids: TaskIds, t: float, workers: WorkerIds) -> None:
        """Tasks started on ``workers``: queued as a ``started`` event."""
        self.items.append(["started", t, _ids(ids), _ids(workers), ""])

    def finished(self, ids: TaskIds, t: float, codes: list[int] | None = None) -> None:
        """Tasks finished (with their exit ``codes`` if known): queued as a ``finished`` event."""
        self.items.append(["finished", t, _ids(ids), codes or [], ""])

    def completion_known(self, ids: TaskIds, t: float) -> None:
        """The scheduler learned that the tasks finished: queued as a ``known`` event."""
        self.items.append(["known", t, _ids(ids), [], ""])

    def preempted(self, ids: TaskIds, t: float) -> None:
        """Tasks were killed to make room (preemption): queued as a ``lost`` event noted ``preempted``."""
        self.items.append(["lost", t, _ids(ids), [], "preempted"])

    def lost(self, ids: TaskIds, t: float, note: str) -> None:
        """A run was cut short (its worker died); the task will run again."""
        self.items.append(["lost", t, _ids(ids), [], note])

    def failed(self, ids: TaskIds, t: float, codes: list[int], note: str) -> None:
        """Task runs failed (``codes``, ``note``): queued as a ``failed`` event."""
        self.items.append(["failed", t, _ids(ids), list(codes), note])

    def output(self, task: int, t: float, text: str) -> None:
        """The tail (2,000 characters) of a task's output: queued as an ``output`` event."""
        self.items.append(["output", t, [int(task)], [], text[-2000:]])

    def add_comm(self, ids: TaskIds, d: object) -> None:
        """Communication delay is a simulator measure: ignored live."""
        pass

    def add_proc(self, ids: TaskIds, d: object) -> None:
        """Processing delay is a simulator measure: ignored live."""
        pass

    def add_worker_queue(self, ids: TaskIds, d: object) -> None:
        """Worker queuing delay is a simulator measure: ignored live."""
        pass

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name``."""
        self.counters[name] += n

    def expect(self, n: int) -> None:
        """The simulator's count of outstanding tasks: ignored live."""
        pass

    def take(self) -> list[list]:
        """The queued events, oldest first (the queue is emptied)."""
        out, self.items = self.items, []
        return out


class LivePort:
    """A component's port in the live runtime."""

    def __init__(self, rt: Runtime, hosted: Hosted, rng: np.random.Generator, ring: int = 0) -> None:
        self.rt = rt
        self.h = hosted
        self.rng = rng
        self.epoch = rt.epoch
        self.term = 0
        self.seq: dict[str, int] = {}
        self.muted = False  # standby: record, do not send
        self.ring: deque | None = deque(maxlen=ring) if ring else None
        self._timers: dict[int, list] = {}  # handle -> [asyncio handle | None, key, due]
        self._n = 0
        self.sent = 0

    def send(self, dst: str, msg: Any) -> None:
        """Encode ``msg`` for ``dst`` with this sender's next sequence number and publish it (kept in the replication
        ring; not published while muted)."""
        s = self.seq.get(dst, 0) + 1
        self.seq[dst] = s
        data = wire.encode(msg, self.h.address, dst, self.epoch, s, self.term)
        if self.ring is not None:
            self.ring.append((dst, data, self.h.now))
        if not self.muted:
            self.sent += 1
            if self.h.role == "active":  # sent once the records it follows from are in the replication log
                self.h.gate(dst, data)
            else:
                self.rt.send_raw(dst, data)

    def set_timer(self, delay: float, key: Hashable) -> int:
        """Fire the component's ``on_timer(key)`` ``delay`` seconds from now on the event loop (recorded but not
        armed while muted); returns its handle."""
        self._n += 1
        h = self._n
        due = self.h.now + max(0.0, delay)
        entry = [None, key, due]
        self._timers[h] = entry
        if not self.muted:
            entry[0] = self.rt.loop.call_later(max(0.0, delay), self._fire, h)
        return h

    def cancel_timer(self, handle: int) -> None:
        """Cancel the timer ``handle`` (no error if it already fired)."""
        e = self._timers.pop(handle, None)
        if e is not None and e[0] is not None:
            e[0].cancel()

    def _fire(self, h: int) -> None:
        e = self._timers.get(h)
        if e is None:
            return
        if self.h.hold_timers_offline and not self.rt.transport.connected and not self.rt.closed:
            e[0] = self.rt.loop.call_later(0.05, self._fire, h)  # time stands still while nobody can hear us
            return
        del self._timers[h]
        self.h.timer(e[1])

    def pop_timer(self, key: Hashable) -> None:
        """Standby: the active's timer ``key`` fired; forget our record of it (earliest first)."""
        best = None
        for h, e in self._timers.items():
            if e[1] == key and (best is None or e[2] < self._timers[best][2]):
                best = h
        if best is not None:
            del self._timers[best]

    def go_live(self, term: int) -> None:
        """Standby → active: re-send recent outputs, arm the recorded timers, send from now on."""
        self.muted = False
        if self.ring is not None:  # flagged: a receiver that started since drops them (they were for its predecessor)
            for dst, data, made_at in self.ring:
                self.rt.send_raw(dst, wire.mark_resent(data, made_at))
        self.term = term
        now = time.time()
        for h, e in self._timers.items():
            e[0] = self.rt.loop.call_later(max(0.0, e[2] - now), self._fire, h)

    def close(self) -> None:
        """Cancel every pending timer."""
        for e in self._timers.values():
            if e[0] is not None:
                e[0].cancel()
        self._timers.clear()


def _ring_tail(ring: deque | None, budget: int) -> list[tuple]:
    """The latest outputs of a re-send ring that fit in ``budget`` bytes, oldest first (a snapshot keeps those: the
    outputs a successor may have to send again are the latest ones)."""
    out: list[tuple] = []
    for x in reversed(ring or ()):
        budget -= len(x[1]) + 32
        if budget < 0:
            break
        out.append(tuple(x))
    out.reverse()
    return out


class _Stream:
    """Receiver side of one ``(src, dst)`` stream: incarnation, highest delivered ``seq``, term, held messages."""

    __slots__ = ("epoch", "gap_since", "held", "hwm", "term")

    def __init__(self, epoch: int, hwm: int, term: int) -> None:
        self.epoch = epoch
        self.hwm = hwm
        self.term = term
        self.held: dict[int, tuple] | None = None
        self.gap_since = 0.0


class Hosted:
    """One component inside a runtime, with its role (``active``, ``standby``, ``solo`` or ``deposed``)."""

    def __init__(
        self,
        rt: Runtime,
        comp: Component,
        seed: int,
        role: str = "solo",
        ring: int = 4096,
        failover_timeout: float = 1.0,
        validate: Callable[[Any], None] | None = None,
        hold_timers_offline: bool = False,
    ) -> None:
        self.rt = rt
        self.comp = comp
        self.address = comp.address
        self.role = role
        self.replicated = role in ("active", "standby")
        # the stream named by the address, not by the instance: an active and its standbys replay the same inputs
        # with the same draws, and a restarted component draws what it drew before
        self.port = LivePort(rt, self, named_stream(seed, self.address), ring=ring if self.replicated else 0)
        self.port.muted = role == "standby"
        self.validate = validate or getattr(comp, "validate", None)
        self.hold_timers_offline = hold_timers_offline
        self.now = time.time()
        self.counters: Counter = Counter()
        self.failover_timeout = failover_timeout
        self.compact_every = 0  # active: write a snapshot and purge the log before it every so many records
        self._snap_n = 0  # record number of the latest snapshot written or applied
        self._repl_n = 0
        self._recs: list[bytes] = []  # active: records not yet written to the log
        self._outs: list[tuple[str, bytes]] = []  # active: outputs waiting for their records to be stored
        self._writing = False  # a batch of records is on its way to the log
        self._kick_armed = False
        self._log_seq = 0  # position of the log's last record (as far as this instance knows)
        self._claiming = 0  # standby: the term it is taking over with, while it writes its first record
        self._repl_pos = 0  # standby: stream position of the latest replication record received
        self._repl_held: dict[int, Repl] = {}
        self._last_heard = time.monotonic()
        self._born = time.monotonic()
        self._seen_active = False
        self._beat_n = 0
        self.resume_pos = 0  # standby: inbox position its successor reads from
        self._tasks: list[asyncio.Task] = []
        self._inbox = None
        self.started = False
        self.aliases: set[str] = set()
        self.event_window = 0.01  # the shortest coalescing window; it grows with the rate of events (adaptive_window)
        self._event_win = 0.0  # the current one (0: event_window)
        self._events_armed = False
        self.on_deposed: Callable[[], None] | None = None
        comp.attach(self.port)

    @property
    def term_key(self) -> str:
        """The key of this component's term (leadership) in the transport's terms bucket."""
        return self.address.replace("/", ".")

    # --- inputs ----------------------------------------------------------------------------------------
    def on_data(self, data: bytes, pos: int = 0) -> None:
        """One message from the component's inbox at stream position ``pos``: decoded, checked for its address, and
        delivered in order exactly once (malformed or misaddressed ones are rejected)."""
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            self.reject(f"malformed message: {e}")
            return
        if env.dst != self.address and env.dst not in self.aliases:
            self.reject(f"{env.type} from {env.src!r} addressed to {env.dst!r}")
            return
        if self.role in ("deposed", "standby"):
            return
        for e, raw, p in self.rt.admit(env, data, pos):
            self.deliver(e, raw, p)

    def deliver(self, env: wire.Envelope, data: bytes, pos: int) -> None:
        """Hand an admitted message to the component (an active replica logs it for its standby first)."""
        if self.role == "active":
            self._replicate("msg", "", data, self.rt.resume_from(pos))
        self.handle(env)

    def reject(self, why: str) -> None:
        """Count and log a message that is not handled."""
        self.counters["rejected_messages"] += 1
        self.rt.counters["rejected_messages"] += 1
        log.warning("%s: rejected %s", self.address, why)

    def handle(self, env: wire.Envelope, now: float | None = None) -> None:
        """Validate ``env``'s message and run the component's ``on_message`` at ``now`` (the wall clock by default);
        a handler's error is counted and logged, then pending task events are sent."""
        if self.validate is not None:
            try:
                self.validate(env.msg)
            except (ValueError, KeyError, TypeError, IndexError) as e:
                self.reject(f"{env.type} from {env.src!r}: {e}")
                return
        self.now = time.time() if now is None else now
        try:
            self.comp.on_message(env.msg, self.now)
        except Exception:
            self.counters["handler_errors"] += 1
            self.rt.counters["handler_errors"] += 1
            log.exception("%s: handling %s from %s failed", self.address, env.type, env.src)
        self.flush_events()

    def timer(self, key: Hashable, now: float | None = None) -> None:
        """Run the component's ``on_timer(key)`` at ``now`` (an active replica logs the firing first); errors are
        counted and logged."""
        if self.role == "active":
            self._replicate("timer", str(key), b"")
        self.now = time.time() if now is None else now
        try:
            self.comp.on_timer(key, self.now)
        except Exception:
            self.counters["handler_errors"] += 1
            log.exception("%s: timer %r failed", self.address, key)
        self.flush_events()

    def _hook(self, name: str, now: float) -> None:
        hook = getattr(self.comp, name, None)
        if hook is not None:
            self.now = now
            try:
                hook(now)
            except Exception:
                self.counters["handler_errors"] += 1
                log.exception("%s: %s failed", self.address, name)
            self.flush_events()

    async def start(self) -> None:
        """Start the component in its role: claim the term (active; a lost claim makes it a standby), run
        ``on_start`` and open its inbox, or follow the active's replication log (standby)."""
        tr = self.rt.transport
        if self.role == "active" and not await tr.claim(self.term_key, 1):
            log.warning("%s: another instance already holds this LM: starting as a standby", self.address)
            self.role = "standby"
            self.port.muted = True
        if self.role == "active":
            self.port.term = 1
            self._log_seq = await tr.last_position(self.rt.repl_subject(self.address))
        if self.role != "standby":
            if self.role == "active":
                self._replicate("start", "", b"")
            self.now = time.time()
            self.comp.on_start(self.now)
            self.started = True
            self.flush_events()
            await self._open_inbox(None)
        if self.role == "active":
            await self._become_active_tasks()
        elif self.role == "standby":
            self._tasks.append(
                asyncio.ensure_future(tr.subscribe(self.rt.subject(self.address + "/alive"), self.on_alive))
            )
            await tr.consume(self.rt.repl_subject(self.address), self.on_repl, 1)
            self._tasks.append(asyncio.ensure_future(self._watch_loop()))
        tr.on_reconnect(self._on_reconnect)

    async def _open_inbox(self, start: int | None) -> None:
        tr = self.rt.transport
        self._inbox = await tr.consume(self.rt.inbox_subject(self.address), self.on_data, start)
        for s in self.aliases:
            if s not in CORE:
                await tr.consume(self.rt.inbox_subject(s), self.on_data, start)

    async def _become_active_tasks(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._beat_loop()))
        self._tasks.append(asyncio.ensure_future(self._term_watch()))
        sub = await self.rt.transport.subscribe(self.rt.subject(self.address + "/fence"), self._on_fence)
        self.rt._subs.append(sub)

    def _on_reconnect(self) -> None:
        if self.role in ("active", "solo") and self.started:
            now = time.time()
            if self.role == "active":
                self._replicate("resume", "", b"")
            self._hook("on_resume", now)

    def flush_events(self, force: bool = False) -> None:
        """Send the component's pending task events. A replicated component sends them at once (its outputs
        must follow its inputs deterministically); others coalesce them for ``event_window`` seconds, a window that
        grows with the rate of events (:func:`adaptive_window`, up to ``EVENT_WINDOW_MAX``)."""
        rec = getattr(self.comp, "rec", None)
        if not isinstance(rec, ForwardingRecorder) or not rec.items:
            return
        if force or self.replicated or self.event_window <= 0 or len(rec.items) >= 512:
            for dst, items in events_by_client(rec.take()):
                self.port.send(dst, Events(self.address, items))
        elif not self._events_armed:
            self._events_armed = True
            win = self._event_win or self.event_window
            self.rt.loop.call_later(win, self._flush_later, win)

    def _flush_later(self, win: float = 0.0) -> None:
        self._events_armed = False
        if self.role == "deposed":
            return
        rec = getattr(self.comp, "rec", None)
        if win > 0 and isinstance(rec, ForwardingRecorder):
            n = sum(len(it[2]) for it in rec.items)
            self._event_win = adaptive_window(self.event_window, max(self.event_window, EVENT_WINDOW_MAX), n / win)
        self.flush_events(force=True)

    # --- replication -------------------------------------------------------------------------------------
    def _replicate(self, what: str, key: str, data: bytes, pos: int = 0) -> None:
        """Log one input (before handling it); records are written in batches, see :meth:`_write`."""
        self._repl_n += 1
        msg = Repl(getattr(self.comp, "l", 0), self._repl_n, what, time.time(), key, data, pos or self.resume_pos)
        if pos:
            self.resume_pos = pos
        self._recs.append(wire.encode(msg, self.address, self.address + "/standby", self.port.epoch))
        self._arm_write()

    def gate(self, dst: str, data: bytes) -> None:
        """An active's output: sent once every record logged so far is stored (a successor, which reads the log
        to its end before it takes over, then knows of every input whose outputs anyone saw)."""
        self._outs.append((dst, data))
        self._arm_write()

    def _arm_write(self) -> None:
        if not self._kick_armed:
            self._kick_armed = True
            self.rt.loop.call_soon(self._write)

    def _write(self) -> None:
        """Write the pending records as one batch where the log ends (group commit), or release the outputs when
        every record is stored. The broker refuses the batch when the log moved on: another instance took over
        (it wrote its first record at the end it had read), so this one is deposed and its outputs never leave."""
        self._kick_armed = False
        if self._writing or self.role != "active":
            return
        if not self._recs:
            outs, self._outs = self._outs, []
            for dst, data in outs:
                self.rt.send_raw(dst, data)
            return
        snap = self.compact_every and self._repl_n - self._snap_n >= self.compact_every
        if snap and not self._snapshot_record():
            snap = False
        recs, outs = self._recs, self._outs
        self._recs, self._outs = [], []
        self._writing = True
        batch = wire.encode(
            ReplBatch(getattr(self.comp, "l", 0), recs),
            self.address,
            self.address + "/standby",
            self.port.epoch,
            0,
            self.port.term,
        )
        headers = {
            "Nats-Expected-Last-Subject-Sequence": str(self._log_seq),
            "Nats-Msg-Id": f"{self.address}@{self.port.term}:{self._log_seq}",
        }
        self.counters["replication_batches"] += 1

        def done(seq: int | None, err: str | None) -> None:
            self._writing = False
            if seq is None:
                self.depose(f"the replication log moved on ({err}): another instance took over")
                return
            self._log_seq = seq
            for dst, data in outs:
                self.rt.send_raw(dst, data)
            if snap:  # every record before the snapshot's batch is in the snapshot: drop them from the log
                self.counters["log_compactions"] += 1
                self.rt.transport.purge_before(self.rt.repl_subject(self.address), seq)
            if self._recs or self._outs:
                self._arm_write()

        self.rt.transport.publish_durable(self.rt.repl_subject(self.address), batch, headers, done)

    # --- log compaction ------------------------------------------------------------------------------------
    def _snapshot_record(self) -> bool:
        """Append a ``snapshot`` record (this instance's state after every record so far) to the pending ones;
        False when the state cannot be written (compaction is then off for this instance)."""
        from megha.live import snapshot

        port = self.port
        state = {
            "comp": snapshot.component_state(self.comp),
            "seq": dict(port.seq),
            "epoch": port.epoch,
            "term": port.term,
            "timer_n": port._n,
            "timers": [(h, e[1], e[2]) for h, e in port._timers.items()],
            "ring": _ring_tail(port.ring, RING_SNAPSHOT_BYTES),
            "rng": port.rng.bit_generator.state,
            "streams": self.rt.stream_state(self.address, self.aliases),
            "now": self.now,
            "started": self.started,
            "counters": dict(getattr(getattr(self.comp, "rec", None), "counters", {}) or {}),
        }
        try:
            data = snapshot.dump_state(state)
        except snapshot.SnapshotError as e:
            log.error("%s: cannot write a snapshot (%s): the replication log is not compacted", self.address, e)
            self.compact_every = 0
            return False
        if len(data) + sum(map(len, self._recs)) > MAX_SNAPSHOT_BATCH:  # the broker's payload limit is 1 MB
            self.counters["snapshots_deferred"] += 1
            if len(data) > MAX_SNAPSHOT_BATCH:
                self._snap_n = self._repl_n  # too large now: try again after another ``compact_every`` records
                log.warning("%s: a snapshot of %d bytes is too large to write: not compacted", self.address, len(data))
            return False
        self._repl_n += 1
        self._snap_n = self._repl_n
        rec = Repl(getattr(self.comp, "l", 0), self._repl_n, "snapshot", time.time(), "", data, self.resume_pos)
        self._recs.append(wire.encode(rec, self.address, self.address + "/standby", self.port.epoch))
        self.counters["snapshots_written"] += 1
        return True

    def _restore(self, r: Repl) -> None:
        """Standby that missed the records before a snapshot (they were purged): take the state it holds."""
        from megha.live import snapshot

        st = snapshot.load_state(r.data)
        for k, v in st["comp"].items():
            setattr(self.comp, k, v)
        rec = getattr(self.comp, "rec", None)
        if isinstance(rec, ForwardingRecorder):
            rec.counters = Counter(st["counters"])
        port = self.port
        port.close()
        port.seq = dict(st["seq"])
        port.epoch = st["epoch"]
        port.term = max(port.term, st["term"])
        port._n = st["timer_n"]
        port._timers = {h: [None, key, due] for h, key, due in st["timers"]}
        if port.ring is not None:
            port.ring.clear()
            port.ring.extend(tuple(x) for x in st["ring"])
        port.rng.bit_generator.state = st["rng"]
        self.rt.restore_streams(st["streams"])
        self.now = st["now"]
        self.started = st["started"]
        self.counters["snapshots_restored"] += 1

    def _on_fence(self, data: bytes) -> None:
        """A standby took over while this active was alive (it stalled): step down for good."""
        try:
            env = wire.decode(data)
        except wire.WireError:
            return
        if self.role == "active" and env.term > self.port.term:
            self.depose(f"a standby took over (term {env.term})")

    def depose(self, why: str) -> None:
        """Step down: another instance took over (it claimed a newer term, or the replication log moved on without
        this one). Mute the port, stop the tasks, leave the inbox and report the new role."""
        if self.role == "deposed":
            return
        log.error("%s: %s: this instance steps down", self.address, why)
        self.role = "deposed"
        self._recs.clear()
        self._outs.clear()
        self.port.muted = True
        self.port.close()
        for t in self._tasks:
            t.cancel()
        if self._inbox is not None:
            self._tasks.append(asyncio.ensure_future(self.rt.transport.unsubscribe(self._inbox)))
        self.rt.publish_status_now()
        if self.on_deposed is not None:
            self.on_deposed()

    async def _beat_loop(self) -> None:
        period = self.failover_timeout / 5
        subj = self.rt.subject(self.address + "/alive")
        while self.role == "active":
            msg = Repl(getattr(self.comp, "l", 0), self._repl_n, "beat", time.time(), str(self.port.term))
            self.rt.transport.publish(subj, wire.encode(msg, self.address, self.address + "/alive", self.port.epoch))
            await asyncio.sleep(period)

    async def _term_watch(self) -> None:
        while self.role == "active":
            await asyncio.sleep(self.failover_timeout)
            if not self.rt.transport.connected:
                continue
            try:
                cur = await self.rt.transport.current_term(self.term_key)
            except Exception:
                continue
            if cur > self.port.term:
                self.depose(f"term {cur} was claimed by another instance")

    def on_alive(self, data: bytes) -> None:
        """Standby: an active replica's heartbeat (resets the failover clock)."""
        if self.role != "standby":
            return
        try:
            env = wire.decode(data)
        except wire.WireError:
            return
        r = env.msg
        if isinstance(r, Repl) and r.what == "beat":
            self._last_heard = time.monotonic()
            self._seen_active = True
            self._beat_n = max(self._beat_n, r.n)

    def on_repl(self, data: bytes, pos: int = 0) -> None:
        """Standby: one record of the active's replication log."""
        if self.role != "standby":
            return
        self._repl_pos = max(self._repl_pos, pos)
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            self.reject(f"malformed replication record: {e}")
            return
        if isinstance(env.msg, ReplBatch):
            if self._claiming and env.term >= self._claiming:
                return  # the first record of our own takeover
            if env.term > self.port.term:
                # what the records make this standby send (recorded, re-sent when it takes over) carries the term
                # the active sent it with: receivers drop a lower term than they have seen (a deposed active's), so
                # re-sent outputs the active never got out (it died after the batch was stored) were all dropped
                self.port.term = env.term
            for raw in env.msg.records:
                self.on_repl(raw, pos)
            return
        r: Repl = env.msg
        if not isinstance(r, Repl):
            self.reject(f"{env.type} on the replication subject")
            return
        self._last_heard = time.monotonic()
        self._seen_active = True  # records in the log: there is (or was) an active, whose silence counts
        if r.n <= self._repl_n:
            return
        if self.port.epoch != env.epoch:  # follow the active's incarnation (its sequence numbers)
            self.port.epoch = env.epoch
        if r.what == "snapshot":
            if r.n > self._repl_n + 1:  # the records before it were purged: start from the snapshot's state
                try:
                    self._restore(r)
                except Exception as e:
                    self.reject(f"unreadable snapshot record {r.n}: {e}")
                    return
                self._repl_held = {k: v for k, v in self._repl_held.items() if k > r.n}
            self._repl_n = self._snap_n = r.n
            if r.pos:
                self.resume_pos = r.pos
            held = self._repl_held
            while held and self._repl_n + 1 in held:
                self._apply(held.pop(self._repl_n + 1))
            return
        if r.n > self._repl_n + 1:  # a re-published record may be stored after a later one: wait for it
            self._repl_held[r.n] = r
            self.counters["replication_held"] += 1
            return
        self._apply(r)
        held = self._repl_held
        while held and self._repl_n + 1 in held:
            self._apply(held.pop(self._repl_n + 1))

    def _apply(self, r: Repl) -> None:
        self._repl_n = r.n
        if r.pos:
            self.resume_pos = r.pos
        if r.what == "start":
            self.now = r.now
            self.comp.on_start(r.now)
            self.started = True
            self.flush_events()
        elif r.what == "msg":
            try:
                inner = wire.decode(r.data)
            except wire.WireError as e:
                self.reject(f"replicated: {e}")
                return
            for e, _, _ in self.rt.admit(inner, r.data, 0):
                self.handle(e, r.now)
        elif r.what == "timer":
            key: Hashable = r.key
            self.port.pop_timer(key)
            self.timer(key, r.now)
        elif r.what == "resume":
            self._hook("on_resume", r.now)
        elif r.what == "takeover":
            self.counters["takeovers_replayed"] += 1
            self._hook("on_takeover", r.now)

    async def _watch_loop(self) -> None:
        period = max(0.02, self.failover_timeout / 10)
        tr = self.rt.transport
        while self.role == "standby":
            t = time.monotonic()
            await asyncio.sleep(period)
            mono = time.monotonic()
            if mono - t > period + self.failover_timeout / 2:
                self._last_heard = mono  # this process stalled: the active's records may be queued
                continue
            if not tr.connected:
                continue
            heard = max(self._last_heard, tr.connected_since)
            if mono - heard <= self.failover_timeout:
                continue
            # a standby that never saw an active (the supervisor started it after the active died) waits a little
            # longer, so one that was following the dead active wins when there is one
            if not self._seen_active and mono - self._born < 3 * self.failover_timeout:
                continue
            if self._repl_held and mono - heard < 5 * self.failover_timeout:
                continue  # a gap in the log may still fill
            await self.takeover()

    async def _caught_up(self) -> bool:
        """Wait (a little) until every record stored in the replication log has reached this standby: taking over
        with a stale state would re-decide inputs the active already acted on, differently."""
        tr = self.rt.transport
        try:
            last = await tr.last_position(self.rt.repl_subject(self.address))
        except Exception as e:
            log.warning("%s: cannot read the replication log's end (%s)", self.address, e)
            return False
        end = time.monotonic() + 5 * self.failover_timeout
        while self._repl_pos < last and self.role == "standby":
            if time.monotonic() > end:
                self.counters["takeover_deferred"] += 1
                log.warning("%s: log read to %d of %d: takeover deferred", self.address, self._repl_pos, last)
                self._last_heard = time.monotonic()
                return False
            await asyncio.sleep(0.02)
        return self.role == "standby"

    async def takeover(self) -> None:
        """Standby → active (the active fell silent): read the replication log to its end, claim the next term,
        then serve."""
        tr = self.rt.transport
        if not await self._caught_up():
            return
        if time.monotonic() - self._last_heard <= self.failover_timeout:
            # the active wrote (or beat) while this standby read the log: it is alive. Under load an active that
            # starts after its standby can take longer than the standby's grace; without this check the standby
            # took over right as the active's first records arrived (a needless failover at every such start)
            self.counters["takeover_aborted"] += 1
            return
        try:
            term = max(await tr.current_term(self.term_key), self.port.term) + 1
            won = await tr.claim(self.term_key, term)
        except Exception as e:
            log.warning("%s: takeover attempt failed (%s)", self.address, e)
            return
        if not won:
            self._seen_active = False
            self._last_heard = time.monotonic()
            self._born = time.monotonic()
            return
        fence = Control("takeover", str(term))
        tr.publish(  # the old active (if it only stalled) stops writing
            self.rt.subject(self.address + "/fence"),
            wire.encode(fence, self.address, self.address + "/fence", self.port.epoch, 0, term),
        )
        first = await self._write_first(term)
        if first is None:
            return
        log.warning(
            "%s: standby takes over as term %d (active silent for %.2f s; %d log records applied)",
            self.address,
            term,
            time.monotonic() - self._last_heard,
            self._repl_n,
        )
        if self._repl_held:
            log.error("%s: %d replication record(s) after a gap are skipped", self.address, len(self._repl_held))
            self.counters["replication_gaps"] += len(self._repl_held)
            self._repl_held.clear()
        self.role = "active"
        self.counters["takeovers"] += 1
        self.port.go_live(term)
        now = first.now
        if first.what == "start":  # nobody ever started this LM
            self.comp.on_start(now)
            self.started = True
            self.flush_events()
        else:
            self._hook("on_takeover", now)
        await self._open_inbox(self.resume_pos or None)
        await self._become_active_tasks()
        self.rt.publish_status_now()

    async def _write_first(self, term: int) -> Repl | None:
        """Fence the replication log: write this instance's first record (``takeover``, or ``start`` when nobody
        ever started the LM) exactly where the log ends, after applying every record before it. A deposed
        active that stalled may still append a batch or two (until it hears of the new term): read them too and
        try again. None when the log could not be taken over (this instance stays a standby)."""
        tr = self.rt.transport
        subj = self.rt.repl_subject(self.address)
        loop = asyncio.get_running_loop()
        end = time.monotonic() + 20 * self.failover_timeout + 10.0
        self._claiming = term  # our own first record, read back, is not applied as a standby's input
        try:
            return await self._write_first_loop(term, tr, subj, loop, end)
        finally:
            self._claiming = 0

    async def _write_first_loop(
        self, term: int, tr: Transport, subj: str, loop: asyncio.AbstractEventLoop, end: float
    ) -> Repl | None:
        while self.role == "standby" and time.monotonic() < end:
            try:
                last = await tr.last_position(subj)
            except Exception as e:
                log.warning("%s: cannot read the replication log's end (%s)", self.address, e)
                await asyncio.sleep(0.1)
                continue
            t_read = time.monotonic() + 5 * self.failover_timeout
            while self._repl_pos < last and time.monotonic() < t_read:
                await asyncio.sleep(0.01)
            if self._repl_pos < last:
                continue
            n = self._repl_n + 1
            what = "takeover" if self.started else "start"
            rec = Repl(getattr(self.comp, "l", 0), n, what, time.time(), "", b"", self.resume_pos)
            batch = wire.encode(
                ReplBatch(rec.lm, [wire.encode(rec, self.address, self.address + "/standby", self.port.epoch)]),
                self.address,
                self.address + "/standby",
                self.port.epoch,
                0,
                term,
            )
            fut: asyncio.Future = loop.create_future()

            def done(seq: int | None, err: str | None, fut: asyncio.Future = fut) -> None:
                if not fut.done():
                    fut.set_result((seq, err))

            headers = {"Nats-Expected-Last-Subject-Sequence": str(last), "Nats-Msg-Id": f"{self.address}@{term}:{last}"}
            tr.publish_durable(subj, batch, headers, done)
            try:
                seq, _ = await asyncio.wait_for(fut, 10.0)
            except TimeoutError:
                continue
            if seq is not None:
                self._repl_n = n
                self._log_seq = seq
                return rec
            self.counters["takeover_log_moved"] += 1
            await asyncio.sleep(0.02)
        log.error("%s: the replication log could not be taken over; staying a standby", self.address)
        return None

    def close(self) -> None:
        """Stop the component's tasks and timers."""
        for t in self._tasks:
            t.cancel()
        self.port.close()


class Runtime:
    """One process's (or one in-process service's) connection to the bus and the components it hosts."""

    def __init__(
        self,
        transport: Transport,
        ns: str = "megha",
        name: str = "service",
        kind: str = "service",
        epoch: int | None = None,
        status_period: float = 0.5,
        gap_timeout: float = 10.0,
    ) -> None:
        self.transport = transport
        self.ns = ns
        self.name = name
        self.kind = kind
        self.epoch = epoch if epoch is not None else time.time_ns()
        self.born = time.time()  # re-sent messages made before this are meant for a predecessor (see ``admit``)
        self.loop = asyncio.get_running_loop()
        self.hosted: dict[str, Hosted] = {}
        self.streams: dict[tuple[str, str], _Stream] = {}
        self.counters: Counter = Counter()
        self.status_period = status_period
        self.gap_timeout = gap_timeout
        self._held = 0  # messages held for a gap, over every stream
        self._subs: list[object] = []
        self._tasks: list[asyncio.Task] = []
        self.status_info: Callable[[], dict] | None = None
        self.closed = False
        self._min_held_pos = None
        self._inbox_subjects: dict[str, str] = {}  # address -> durable subject (computed once: a send is hot)

    def subject(self, address: str) -> str:
        """Core (not kept) subject of a fan-out address."""
        return subject_of(self.ns, address)

    def inbox_subject(self, address: str) -> str:
        """Durable subject of a component's inbox (or of the task events)."""
        s = self._inbox_subjects.get(address)
        if s is None:
            if len(self._inbox_subjects) > 4096:  # addresses come from messages too (reply_to): stay bounded
                self._inbox_subjects.clear()
            s = self._inbox_subjects[address] = self._inbox_subject(address)
        return s

    def _inbox_subject(self, address: str) -> str:
        if address == EVENTS:
            address = events_address(0)
        if address.startswith(EVENTS + "/"):
            return subject_of(self.ns, "ev/" + address[len(EVENTS) + 1 :])
        return subject_of(self.ns, "q/" + address)

    def repl_subject(self, address: str) -> str:
        """The subject of the replication log of the component at ``address``."""
        return subject_of(self.ns, "r/" + address)

    def send_raw(self, dst: str, data: bytes) -> None:
        """Publish encoded bytes to ``dst``: on its core subject for a fan-out address, else on its durable inbox."""
        if dst in CORE:
            self.transport.publish(self.subject(dst), data)
        else:
            s = self._inbox_subjects.get(dst)
            self.transport.publish_durable(s if s is not None else self.inbox_subject(dst), data)

    # --- ordered exactly-once delivery ------------------------------------------------------------------
    def admit(self, env: wire.Envelope, data: bytes = b"", pos: int = 0) -> list[tuple[wire.Envelope, bytes, int]]:
        """The messages ``env`` makes deliverable, in order (none when it is a duplicate or arrives early)."""
        if env.seq == 0:
            return [(env, data, pos)]
        key = (env.src, env.dst)
        st = self.streams.get(key)
        if st is None or env.epoch > st.epoch:  # a stream (or an incarnation of its sender) we have not seen
            if env.resent and not env.made_at >= self.born:
                # re-sent by a standby that took over, made before this receiver started: meant for its predecessor.
                # (Made since: the dead active never sent it, and it may be the first message of the stream.)
                self.counters["resent_dropped"] += 1
                return []
            if st is not None and st.held:
                self._held -= len(st.held)
                self.counters["held_dropped_new_epoch"] += len(st.held)
            self.streams[key] = _Stream(env.epoch, env.seq, env.term)
            return [(env, data, pos)]
        if env.epoch < st.epoch or env.term < st.term or env.seq <= st.hwm:
            self.counters["duplicates_dropped"] += 1
            return []
        if env.seq > st.hwm + 1:
            if st.held is None:
                st.held = {}
            if env.seq not in st.held:
                st.held[env.seq] = (env, data, pos)
                self._held += 1
            if not st.gap_since:
                st.gap_since = time.monotonic()
            self.counters["held_for_gap"] += 1
            return []
        st.hwm = env.seq
        st.term = env.term
        out = [(env, data, pos)]
        if st.held:
            self._drain(st, out)
        return out

    def _drain(self, st: _Stream, out: list) -> None:
        held = st.held
        while held and st.hwm + 1 in held:
            e = held.pop(st.hwm + 1)
            self._held -= 1
            st.hwm = e[0].seq
            st.term = max(st.term, e[0].term)
            out.append(e)
        if not held:
            st.gap_since = 0.0

    def resume_from(self, pos: int) -> int:
        """Inbox position a successor must read from, given that the message at ``pos`` is being handled (that
        position again while parts of a bundle stored there are still to come: the parts handled are then dropped as
        duplicates)."""
        nxt = pos if getattr(self.transport, "more_at_pos", False) else pos + 1
        if not self._held:
            return nxt if pos else 0
        lo = min((e[2] for st in self.streams.values() if st.held for e in st.held.values() if e[2]), default=0)
        return min(lo, nxt) if lo else (nxt if pos else 0)

    def release_gaps(self) -> None:
        """Deliver messages held for longer than ``gap_timeout`` (their sender died before filling the gap)."""
        if not self._held:
            return
        now = time.monotonic()
        for key, st in self.streams.items():
            if st.held and now - st.gap_since > self.gap_timeout:
                first = min(st.held)
                log.error("%s: %d message(s) of %s → %s never arrived", self.name, first - st.hwm - 1, *key)
                self.counters["gaps_skipped"] += first - st.hwm - 1
                st.hwm = first - 1
                out: list = []
                self._drain(st, out)
                h = self.hosted.get(key[1])
                for e, raw, p in out:
                    if h is not None and h.role not in ("standby", "deposed"):
                        h.deliver(e, raw, p)
                    elif h is None and self.on_released is not None:
                        self.on_released(e)

    on_released: Callable[[wire.Envelope], None] | None = None

    def stream_state(self, address: str, aliases: set[str] | frozenset = frozenset()) -> list:
        """Receiver state of the streams to ``address`` (or its aliases), for a snapshot."""
        dsts = {address, *aliases}
        return [
            (src, dst, st.epoch, st.hwm, st.term, [(q, e[1], e[2]) for q, e in (st.held or {}).items()])
            for (src, dst), st in self.streams.items()
            if dst in dsts
        ]

    def restore_streams(self, items: list) -> None:
        """Take the receiver state of streams from a snapshot (see :meth:`stream_state`)."""
        for src, dst, epoch, hwm, term, held in items:
            old = self.streams.get((src, dst))
            if old is not None and old.held:
                self._held -= len(old.held)
            st = _Stream(epoch, hwm, term)
            if held:
                st.held = {}
                for q, data, pos in held:
                    st.held[q] = (wire.decode(data), data, pos)
                self._held += len(st.held)
                st.gap_since = time.monotonic()
            self.streams[(src, dst)] = st

    def seen(self, env: wire.Envelope) -> bool:
        """Whether ``env`` was delivered already (its epoch is older, or its sequence number at most the stream's
        highest)."""
        st = self.streams.get((env.src, env.dst))
        return st is not None and (env.epoch < st.epoch or (env.epoch == st.epoch and env.seq <= st.hwm))

    # --- hosting ---------------------------------------------------------------------------------------
    async def host(
        self,
        comp: Component,
        seed: int = 0,
        role: str = "solo",
        failover_timeout: float = 1.0,
        extra_subjects: tuple[str, ...] = (),
        hold_timers_offline: bool = False,
        compact_every: int = 0,
    ) -> Hosted:
        """Attach ``comp``; its inbox is read when the runtime starts. It draws from the stream
        ``named_stream(seed, comp.address)`` — with the simulator's engine seed, what the simulated component of that
        address draws (see :func:`megha.live.deploy.components_seed`). ``compact_every``: a replicated component
        writes a snapshot into its replication log every so many records and purges the records before it."""
        h = Hosted(self, comp, seed, role, failover_timeout=failover_timeout, hold_timers_offline=hold_timers_offline)
        h.compact_every = compact_every if h.replicated else 0
        self.hosted[comp.address] = h
        for s in extra_subjects:  # broadcast addresses this component also listens to (e.g. ``hosts``)
            h.aliases.add(s)
            if s in CORE:
                self._subs.append(await self.transport.subscribe(self.subject(s), h.on_data))
        return h

    async def start(self) -> None:
        """Start every hosted component, then the periodic status reports."""
        for h in self.hosted.values():
            await h.start()
        self._tasks.append(asyncio.ensure_future(self._status_loop()))
        self.publish_status_now()

    def publish_status_now(self) -> None:
        """Publish one status report per hosted component (its role, epoch, ``status_info`` and counters)."""
        if self.closed:
            return
        for h in self.hosted.values():
            info_fn = getattr(h.comp, "status_info", None)
            info = dict(info_fn()) if info_fn is not None and h.started else {}
            c = Counter(h.counters)
            c.update(self.counters)
            tc = getattr(self.transport, "counters", None)
            if tc:
                c.update(tc)
            info["service_counters"] = {k: int(v) for k, v in c.items()}
            info["instance"] = f"{self.name}@{self.epoch}"
            info["pid"] = os.getpid()
            st = Status(
                h.address,
                getattr(h.comp, "kind", "component"),
                h.role if h.role != "solo" else "active",
                h.port.epoch,
                time.time(),
                info,
            )
            self.transport.publish(self.subject(STATUS), wire.encode(st, h.address, STATUS))

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(self.status_period)
            try:
                self.release_gaps()
                self.publish_status_now()
            except Exception:
                log.exception("status report failed")

    async def close(self) -> None:
        """Stop the runtime: its tasks, every hosted component, its subscriptions."""
        self.closed = True
        for t in self._tasks:
            t.cancel()
        for h in self.hosted.values():
            h.close()
        for s in self._subs:
            await self.transport.unsubscribe(s)
        await self.transport.close()
