"""Drive sans-I/O components over a transport, in real time.

A :class:`Runtime` is one service's side of the bus: it hosts components (a GM, an LM, a worker host) at their
logical addresses, gives each a :class:`LivePort` (``send`` → encode + publish, ``set_timer`` → asyncio
``call_later``, a seeded ``rng``), decodes and checks every incoming envelope, and calls ``on_message(msg,
now)`` with ``now`` = wall-clock seconds (``time.time()``: one clock for every process of a machine).

**Exactly-once delivery.** Each port numbers its messages per destination (``seq``) within its incarnation
(``epoch``). A receiver drops a message whose ``(src, dst)`` stream it has already seen up to that ``seq``,
one from an older epoch, or one whose ``term`` is lower than the highest seen (a deposed active LM).

**Bad input.** A message that fails decoding or its schema, that is addressed elsewhere, or that the
component's ``validate`` hook rejects (e.g. worker ids outside the LM's range) is logged and counted
(``rejected_messages``); a handler that raises is logged and counted (``handler_errors``); the service stays up.

**Active/standby** (paper §IV-D). A replicated component runs in one of two roles. The *active* forwards
every input (messages as received, timer firings, its start) to the standby *before* handling it
(:class:`~megha.live.messages.Repl`); the *standby* applies the same inputs in the same order with the
same ``now`` — the components are deterministic, so its state equals the active's — while its port only
records what it would send (same sequence numbers). The standby also receives the component's own inputs
directly and buffers them. When the active falls silent for ``failover_timeout`` the standby takes over: it
re-sends its recent outputs (receivers drop those the active had delivered), raises its term, arms the
timers the component had set, and handles the buffered inputs the active never handled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from megha.live import wire
from megha.live.messages import Control, Events, Repl, Status
from megha.live.transport import Transport, subject_of
from megha.sim.component import Component

log = logging.getLogger("megha.live.runtime")

EVENTS = "events"
STATUS = "status"
HOSTS = "hosts"
CONTROL = "control"


def _ids(x: Any) -> list[int]:
    if isinstance(x, list):
        return list(x)
    if isinstance(x, np.ndarray):
        return x.ravel().tolist()
    if isinstance(x, tuple):
        return list(x)
    return [int(x)]


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

    def decided(self, ids, t: float) -> None:
        self.items.append(["decided", t, _ids(ids), [], ""])

    def started(self, ids, t: float, workers) -> None:
        self.items.append(["started", t, _ids(ids), _ids(workers), ""])

    def finished(self, ids, t: float, codes: list[int] | None = None) -> None:
        self.items.append(["finished", t, _ids(ids), codes or [], ""])

    def completion_known(self, ids, t: float) -> None:
        self.items.append(["known", t, _ids(ids), [], ""])

    def preempted(self, ids, t: float) -> None:
        self.items.append(["lost", t, _ids(ids), [], "preempted"])

    def lost(self, ids, t: float, note: str) -> None:
        """A run was cut short (its worker died); the task will run again."""
        self.items.append(["lost", t, _ids(ids), [], note])

    def failed(self, ids, t: float, codes: list[int], note: str) -> None:
        self.items.append(["failed", t, _ids(ids), list(codes), note])

    def output(self, task: int, t: float, text: str) -> None:
        self.items.append(["output", t, [int(task)], [], text[-2000:]])

    def add_comm(self, ids, d) -> None:
        pass

    def add_proc(self, ids, d) -> None:
        pass

    def add_worker_queue(self, ids, d) -> None:
        pass

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def expect(self, n: int) -> None:
        pass

    def take(self) -> list[list]:
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
        s = self.seq.get(dst, 0) + 1
        self.seq[dst] = s
        data = wire.encode(msg, self.h.address, dst, self.epoch, s, self.term)
        if self.ring is not None:
            self.ring.append((dst, data))
        if not self.muted:
            self.sent += 1
            self.rt.transport.publish(self.rt.subject(dst), data)

    def set_timer(self, delay: float, key: Hashable) -> int:
        self._n += 1
        h = self._n
        due = self.h.now + max(0.0, delay)
        entry = [None, key, due]
        self._timers[h] = entry
        if not self.muted:
            entry[0] = self.rt.loop.call_later(max(0.0, delay), self._fire, h)
        return h

    def cancel_timer(self, handle: int) -> None:
        e = self._timers.pop(handle, None)
        if e is not None and e[0] is not None:
            e[0].cancel()

    def _fire(self, h: int) -> None:
        e = self._timers.pop(h, None)
        if e is not None:
            self.h.timer(e[1])

    def pop_timer(self, key: Hashable) -> None:
        """Standby: the active's timer ``key`` fired; forget our record of it (earliest first)."""
        best = None
        for h, e in self._timers.items():
            if e[1] == key and (best is None or e[2] < self._timers[best][2]):
                best = h
        if best is not None:
            del self._timers[best]

    def go_live(self) -> None:
        """Standby → active: re-send recent outputs, arm the recorded timers, send from now on."""
        self.muted = False
        if self.ring is not None:
            for dst, data in self.ring:
                self.rt.transport.publish(self.rt.subject(dst), data)
        self.term += 1
        now = time.time()
        for h, e in self._timers.items():
            e[0] = self.rt.loop.call_later(max(0.0, e[2] - now), self._fire, h)

    def close(self) -> None:
        for e in self._timers.values():
            if e[0] is not None:
                e[0].cancel()
        self._timers.clear()


class Hosted:
    """One component inside a runtime, with its role (``active``, ``standby`` or ``solo``)."""

    def __init__(
        self,
        rt: Runtime,
        comp: Component,
        seed: int,
        role: str = "solo",
        ring: int = 4096,
        failover_timeout: float = 1.0,
        validate: Callable[[Any], None] | None = None,
    ) -> None:
        self.rt = rt
        self.comp = comp
        self.address = comp.address
        self.role = role
        self.replicated = role in ("active", "standby")
        self.port = LivePort(rt, self, np.random.default_rng(seed), ring=ring if self.replicated else 0)
        self.port.muted = role == "standby"
        self.validate = validate or getattr(comp, "validate", None)
        self.now = time.time()
        self.counters: Counter = Counter()
        self.failover_timeout = failover_timeout
        self._repl_n = 0
        self._last_repl = time.monotonic()
        self._buffer: deque[wire.Envelope] = deque()  # standby: direct inputs not yet applied
        self._tasks: list[asyncio.Task] = []
        self.started = False
        self.on_takeover: Callable[[float], None] | None = None
        self.aliases: set[str] = set()
        self.event_window = 0.01
        self._events_armed = False
        comp.attach(self.port)

    # --- inputs ----------------------------------------------------------------------------------------
    def on_data(self, data: bytes) -> None:
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            self.reject(f"malformed message: {e}")
            return
        if env.dst != self.address and env.dst not in self.aliases:
            self.reject(f"{env.type} from {env.src!r} addressed to {env.dst!r}")
            return
        if self.role == "deposed":
            return
        if self.role == "standby":
            self._buffer.append(env)
            if len(self._buffer) > 100_000:
                self._buffer.popleft()
            return
        if not self.rt.accept(env):
            self.counters["duplicates_dropped"] += 1
            return
        if self.role == "active":
            self._replicate("msg", "", data)
        self.handle(env)

    def reject(self, why: str) -> None:
        self.counters["rejected_messages"] += 1
        self.rt.counters["rejected_messages"] += 1
        log.warning("%s: rejected %s", self.address, why)

    def handle(self, env: wire.Envelope, now: float | None = None) -> None:
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
        if self.role == "active":
            self._replicate("timer", str(key), b"")
        self.now = time.time() if now is None else now
        try:
            self.comp.on_timer(key, self.now)
        except Exception:
            self.counters["handler_errors"] += 1
            log.exception("%s: timer %r failed", self.address, key)
        self.flush_events()

    def start(self) -> None:
        if self.role == "active":
            self._replicate("start", "", b"")
        if self.role != "standby":
            self.now = time.time()
            self.comp.on_start(self.now)
            self.started = True
            self.flush_events()
        if self.role == "active":
            self._tasks.append(asyncio.ensure_future(self._beat_loop()))
            self._tasks.append(asyncio.ensure_future(self._subscribe_fence()))
        elif self.role == "standby":
            self._tasks.append(asyncio.ensure_future(self._watch_loop()))

    def flush_events(self, force: bool = False) -> None:
        """Send the component's pending task events. A replicated component sends them at once (its outputs
        must follow its inputs deterministically); others coalesce them for ``event_window`` seconds."""
        rec = getattr(self.comp, "rec", None)
        if not isinstance(rec, ForwardingRecorder) or not rec.items:
            return
        if force or self.replicated or self.event_window <= 0 or len(rec.items) >= 512:
            self.port.send(EVENTS, Events(self.address, rec.take()))
        elif not self._events_armed:
            self._events_armed = True
            self.rt.loop.call_later(self.event_window, self._flush_later)

    def _flush_later(self) -> None:
        self._events_armed = False
        if self.role != "deposed":
            self.flush_events(force=True)

    # --- replication -------------------------------------------------------------------------------------
    def _replicate(self, what: str, key: str, data: bytes) -> None:
        self._repl_n += 1
        self._last_repl = time.monotonic()
        msg = Repl(getattr(self.comp, "l", 0), self._repl_n, what, time.time(), key, data)
        self.rt.transport.publish(
            self.rt.subject(self.address + "/standby"),
            wire.encode(msg, self.address, self.address + "/standby", self.port.epoch, 0, 0),
        )

    async def _subscribe_fence(self) -> None:
        self.rt._subs.append(
            await self.rt.transport.subscribe(self.rt.subject(self.address + "/fence"), self._on_fence)
        )

    def _on_fence(self, data: bytes) -> None:
        """A standby took over while this active was alive (it stalled): step down for good."""
        try:
            env = wire.decode(data)
        except wire.WireError:
            return
        if self.role == "active" and env.term > self.port.term:
            log.error("%s: a standby took over (term %d): this instance steps down", self.address, env.term)
            self.role = "deposed"
            self.port.muted = True
            self.port.close()
            for t in self._tasks:
                t.cancel()

    async def _beat_loop(self) -> None:
        period = self.failover_timeout / 5
        while True:
            await asyncio.sleep(period)
            if time.monotonic() - self._last_repl >= period:
                self._replicate("beat", "", b"")

    def on_repl(self, data: bytes) -> None:
        """Standby: one record of the active's input stream."""
        if self.role != "standby":
            return
        try:
            env = wire.decode(data)
        except wire.WireError as e:
            self.reject(f"malformed replication record: {e}")
            return
        r: Repl = env.msg
        if not isinstance(r, Repl):
            self.reject(f"{env.type} on the replication subject")
            return
        self._last_repl = time.monotonic()
        if self.port.epoch != env.epoch:  # follow the active's incarnation (its sequence numbers)
            self.port.epoch = env.epoch
        if r.n != self._repl_n + 1 and self._repl_n:
            self.counters["replication_gaps"] += 1
            log.error("%s standby: replication record %d after %d (gap)", self.address, r.n, self._repl_n)
        self._repl_n = r.n
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
            if self.rt.accept(inner):
                self.handle(inner, r.now)
            self._prune()
        elif r.what == "timer":
            key: Hashable = r.key
            self.port.pop_timer(key)
            self.timer(key, r.now)

    def _prune(self) -> None:
        buf = self._buffer
        if len(buf) > 256:
            self._buffer = deque(e for e in buf if not self.rt.seen(e))

    async def _watch_loop(self) -> None:
        period = max(0.02, self.failover_timeout / 10)
        while self.role == "standby":
            t = time.monotonic()
            await asyncio.sleep(period)
            if time.monotonic() - t > period + self.failover_timeout / 2:
                self._last_repl = time.monotonic()  # this process stalled: the active's records may be queued
                continue
            if self.started and time.monotonic() - self._last_repl > self.failover_timeout:
                self.takeover()

    def takeover(self) -> None:
        """Standby → active (the active fell silent)."""
        log.warning(
            "%s: standby takes over (active silent for %.2f s)", self.address, time.monotonic() - self._last_repl
        )
        self.role = "solo"
        self.counters["takeovers"] += 1
        self.port.go_live()
        fence = Control("takeover", str(self.port.term))
        self.rt.transport.publish(
            self.rt.subject(self.address + "/fence"),
            wire.encode(fence, self.address, self.address + "/fence", self.port.epoch, 0, self.port.term),
        )
        now = time.time()
        if self.on_takeover is not None:
            self.on_takeover(now)
        hook = getattr(self.comp, "on_takeover", None)
        if hook is not None:
            self.now = now
            hook(now)
            self.flush_events()
        buf, self._buffer = self._buffer, deque()
        for env in buf:
            if self.rt.accept(env):
                self.handle(env)
        self.rt.publish_status_now()

    def close(self) -> None:
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
    ) -> None:
        self.transport = transport
        self.ns = ns
        self.name = name
        self.kind = kind
        self.epoch = epoch if epoch is not None else time.time_ns()
        self.loop = asyncio.get_running_loop()
        self.hosted: dict[str, Hosted] = {}
        self.streams: dict[tuple[str, str], list[int]] = {}  # (src, dst) -> [epoch, hwm, term]
        self.counters: Counter = Counter()
        self.status_period = status_period
        self._subs: list[object] = []
        self._tasks: list[asyncio.Task] = []
        self.status_info: Callable[[], dict] | None = None
        self.closed = False

    def subject(self, address: str) -> str:
        return subject_of(self.ns, address)

    # --- exactly-once -----------------------------------------------------------------------------------
    def accept(self, env: wire.Envelope) -> bool:
        """True the first time a message of a (src, dst) stream is seen (seq 0 is never de-duplicated)."""
        if env.seq == 0:
            return True
        key = (env.src, env.dst)
        st = self.streams.get(key)
        if st is None:
            self.streams[key] = [env.epoch, env.seq, env.term]
            return True
        if env.epoch > st[0]:
            st[0], st[1], st[2] = env.epoch, env.seq, env.term
            return True
        if env.epoch < st[0] or env.term < st[2] or env.seq <= st[1]:
            return False
        st[1] = env.seq
        st[2] = env.term
        return True

    def seen(self, env: wire.Envelope) -> bool:
        st = self.streams.get((env.src, env.dst))
        return st is not None and (env.epoch < st[0] or (env.epoch == st[0] and env.seq <= st[1]))

    # --- hosting ---------------------------------------------------------------------------------------
    async def host(
        self,
        comp: Component,
        seed: int = 0,
        role: str = "solo",
        failover_timeout: float = 1.0,
        extra_subjects: tuple[str, ...] = (),
    ) -> Hosted:
        """Attach ``comp`` and subscribe to its address (and, for a standby, its replication stream)."""
        h = Hosted(self, comp, seed, role, failover_timeout=failover_timeout)
        self.hosted[comp.address] = h
        self._subs.append(await self.transport.subscribe(self.subject(comp.address), h.on_data))
        if role == "standby":
            self._subs.append(await self.transport.subscribe(self.subject(comp.address + "/standby"), h.on_repl))
        for s in extra_subjects:  # broadcast addresses this component also listens to (e.g. ``hosts``)
            h.aliases.add(s)
            self._subs.append(await self.transport.subscribe(self.subject(s), h.on_data))
        return h

    def start(self) -> None:
        for h in self.hosted.values():
            h.start()
        self._tasks.append(asyncio.ensure_future(self._status_loop()))
        self.publish_status_now()

    def publish_status_now(self) -> None:
        if self.closed:
            return
        for h in self.hosted.values():
            info_fn = getattr(h.comp, "status_info", None)
            info = dict(info_fn()) if info_fn is not None else {}
            c = Counter(h.counters)
            info["service_counters"] = {k: int(v) for k, v in c.items()}
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
                self.publish_status_now()
            except Exception:
                log.exception("status report failed")

    async def close(self) -> None:
        self.closed = True
        for t in self._tasks:
            t.cancel()
        for h in self.hosted.values():
            h.close()
        for s in self._subs:
            await self.transport.unsubscribe(s)
        await self.transport.close()
