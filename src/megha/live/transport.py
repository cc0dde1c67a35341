"""Transports: an in-process bus (tests, one-process demos) and NATS (processes and machines).

Both give the same small interface to :mod:`megha.live.runtime`: ``publish(subject, bytes)`` (non-blocking,
order-preserving per transport), ``subscribe(subject, handler)`` with a synchronous ``handler(bytes)`` run on
the event loop, ``close()``.

**Why NATS.** The paper's prototype used HTTP for launch/repartition/preemption and RabbitMQ for updates.
Measured on this machine size (DESIGN §7, loopback, 200-byte messages): NATS round trip 0.26–0.30 ms and
~213,000 msgs/s; RabbitMQ through aio-pika 0.65–1.2 ms and ~2,500 msgs/s with publisher confirms (gRPC ~0.55
ms, ~16,000 msgs/s). Megha's placement path is three hops (client → GM → LM → worker) and a busy datacenter
sends several messages per task, so at the 1,000 tasks/s target RabbitMQ's throughput would already be the
bottleneck while NATS leaves two orders of magnitude of headroom, and its per-hop latency keeps a 5 ms median
placement budget easy. NATS is a single static binary (Debian ``nats-server``) with an asyncio client
(``nats-py``), per-publisher FIFO order (which Megha's cumulative acknowledgements rely on), and automatic
reconnection. What NATS core does not give — persistence and exactly-once — the runtime adds itself:
per-stream sequence numbers with receiver-side de-duplication, and LM state-machine replication.

Megha's request/reply pairs (launch → reply, preemption → reply, sync → snapshot) are correlated by request
ids inside the messages and acknowledged cumulatively, exactly as in the simulator, so they travel as
point-to-point subjects without blocking the sender; updates, status and task events are published on
fan-out subjects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import time
from abc import ABC, abstractmethod
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from megha.live.wire import BUNDLE_MARK, BUNDLE_MAX_BYTES, MAX_BUNDLE, pack_bundle, unpack_bundle

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription
    from nats.js.kv import KeyValue

log = logging.getLogger("megha.live.transport")
OnAck = Callable[[int | None, str | None], None]  # (stored position, None) or (None, the broker's refusal)

UNANSWERED_FACTOR = 4  # a durable message unanswered for this many ack timeouts is re-published regardless
_DIRECT_MAX_BUFFER = 1 << 20  # bytes buffered (nats-py's or the socket's) above which publishes take the slow path
_NATS_HDR = b"NATS/1.0\r\n"
_CONNECTED = 1  # nats.aio.client.Client.CONNECTED


def _nats_internals_ok(nc: NatsClient) -> bool:
    """Whether this nats-py client has the internals the direct paths use (checked once per connection; without
    them every message goes through nats-py's public publish and subscription tasks)."""
    from nats.aio.client import Client
    from nats.aio.transport import TcpTransport

    return (
        Client.CONNECTED == _CONNECTED
        and isinstance(getattr(nc, "_pending", None), list)
        and isinstance(getattr(nc, "_pending_data_size", None), int)
        and isinstance(getattr(nc, "_transport", None), TcpTransport)
        and hasattr(nc._transport, "_io_writer")
        and isinstance(getattr(nc, "_max_payload", None), int)
        and hasattr(nc, "_flush_queue")
    )


Handler = Callable[[bytes], None]
PosHandler = Callable[[bytes, int], None]
_BAD = re.compile(r"[^A-Za-z0-9_\-]")


def subject_of(ns: str, address: str) -> str:
    """The broker subject of a logical address: ``megha/gm0`` in namespace ``demo`` → ``demo.megha.gm0``."""
    parts = [_BAD.sub("_", p) or "_" for p in address.split("/")]
    return ".".join([_BAD.sub("_", ns) or "_", *parts])


class Transport(ABC):
    """What the runtime needs from a message bus.

    Two kinds of subjects: *core* ones (``publish``/``subscribe``: status, control, liveness beats; a message
    published while nobody listens is gone) and *durable* ones (``publish_durable``/``consume``: every
    point-to-point message, task events and the LMs' replication logs). A durable message is kept by the broker
    (a JetStream stream) and re-published by the sender until the broker acknowledged it; a consumer reads a
    subject from a stream position and resumes after the last position it handled when the connection comes
    back, so broker restarts and outages of any length lose nothing.
    """

    name = "transport"

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Connect (may retry)."""

    @abstractmethod
    def publish(self, subject: str, data: bytes) -> None:
        """Queue ``data`` for ``subject``; never blocks; keeps this transport's order."""

    def publish_durable(
        self,
        subject: str,
        data: bytes,
        headers: dict[str, str] | None = None,
        on_ack: Callable[[int | None, str | None], None] | None = None,
    ) -> None:
        """Like :meth:`publish`, for a subject a stream keeps (re-sent until the broker stored it).

        ``headers`` may carry ``Nats-Msg-Id`` (the broker stores a message id once) and
        ``Nats-Expected-Last-Subject-Sequence`` (stored only when the subject's last message is at that position);
        ``on_ack(position, None)`` is called once it is stored, ``on_ack(None, reason)`` when the broker refused it
        for good (the expected position did not match)."""
        self.publish(subject, data)
        if on_ack is not None:
            asyncio.get_running_loop().call_soon(on_ack, 0, None)

    @abstractmethod
    async def subscribe(self, subject: str, handler: Handler) -> object:
        """Call ``handler(data)`` on the loop for every message on ``subject``; returns a token."""

    async def consume(
        self, subject: str, handler: PosHandler, start: int | None = None, timeout: float | None = None
    ) -> object:
        """Call ``handler(data, pos)`` for every message stored on a durable ``subject`` from stream position
        ``start`` (``None``: only new ones), in order, resuming after the last one handled on reconnection.
        ``timeout``: how long the broker may take to set the reading up (raises ``ConnectionError`` after)."""
        return await self.subscribe(subject, lambda data: handler(data, 0))

    @abstractmethod
    async def unsubscribe(self, token: object) -> None:
        """Stop the subscription or consumer ``token`` (as returned by :meth:`subscribe` or :meth:`consume`)."""

    async def flush(self, timeout: float = 2.0) -> None:  # noqa: B027 - optional hook
        """Wait until queued messages have left this process."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Disconnect; queued messages may be dropped."""

    async def ensure_streams(self, reset: bool = False) -> None:  # noqa: B027 - optional hook
        """Create the deployment's streams (``reset``: empty them first)."""

    async def claim(self, key: str, term: int) -> bool:
        """Compare-and-set election: True when this caller moved ``key`` to ``term`` (greater than its
        current value); False when it already holds ``term`` or more (someone else won)."""
        return True

    async def current_term(self, key: str) -> int:
        """The value last claimed for ``key`` (0 when never claimed)."""
        return 0

    async def last_position(self, subject: str) -> int:
        """Stream position of the last message stored on durable ``subject`` (0: none)."""
        return 0

    def purge_before(self, subject: str, seq: int) -> None:  # noqa: B027 - optional hook
        """Drop the messages stored on durable ``subject`` before stream position ``seq`` (in the background)."""

    def on_reconnect(self, cb: Callable[[], None]) -> None:
        """Call ``cb()`` every time the connection comes back after a loss."""
        self._reconnect_cbs = [*getattr(self, "_reconnect_cbs", []), cb]

    def _fire_reconnect(self) -> None:
        for cb in getattr(self, "_reconnect_cbs", []):
            try:
                cb()
            except Exception:
                log.exception("reconnect hook failed")

    @property
    def connected(self) -> bool:
        """Whether the transport is connected to its broker now (always, in process)."""
        return True

    @property
    def connected_since(self) -> float:
        """``time.monotonic()`` of the latest (re)connection."""
        return 0.0


class InProcBroker:
    """A message bus inside one event loop: every publish is delivered with ``loop.call_soon`` (FIFO).

    Durable subjects keep every message (a list per subject) so a consumer may start from any position, and
    ``terms`` stands in for the broker's compare-and-set store."""

    def __init__(self) -> None:
        self.subs: dict[str, list[tuple[int, Handler]]] = defaultdict(list)
        self.logs: dict[str, list[bytes]] = defaultdict(list)
        self.terms: dict[str, int] = {}
        self.msg_ids: dict[str, int] = {}
        self._n = 0
        self.published = 0
        self.purged = 0
        self.drop: Callable[[str, bytes], bool] | None = None  # fault injection: return True to drop

    def transport(self) -> InProcTransport:
        """A new connection to this bus."""
        return InProcTransport(self)


class InProcTransport(Transport):
    """A connection to an :class:`InProcBroker`."""

    name = "inproc"

    def __init__(self, broker: InProcBroker) -> None:
        self.broker = broker
        self.mine: list[tuple[str, int]] = []
        self.closed = False

    def publish(self, subject: str, data: bytes) -> None:
        if self.closed:
            return
        b = self.broker
        b.published += 1
        if b.drop is not None and b.drop(subject, data):
            return
        subs = b.subs.get(subject)
        if not subs:
            return
        loop = asyncio.get_running_loop()
        for _, h in list(subs):
            loop.call_soon(_guarded, h, data)

    def publish_durable(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None, on_ack: OnAck | None = None
    ) -> None:
        if self.closed:
            return
        b = self.broker
        if b.drop is not None and b.drop(subject, data):
            return
        log_ = b.logs[subject]
        mid = None
        if headers:
            loop = asyncio.get_running_loop()
            mid = headers.get("Nats-Msg-Id")
            if mid is not None and mid in b.msg_ids:
                if on_ack is not None:
                    loop.call_soon(on_ack, b.msg_ids[mid], None)
                return
            exp = headers.get("Nats-Expected-Last-Subject-Sequence")
            if exp is not None and int(exp) != len(log_):
                if on_ack is not None:
                    loop.call_soon(on_ack, None, f"wrong last sequence: {len(log_)}")
                return
        log_.append(data)
        if mid is not None:
            b.msg_ids[mid] = len(log_)
        self.publish(subject, data)
        if on_ack is not None:
            asyncio.get_running_loop().call_soon(on_ack, len(log_), None)

    def purge_before(self, subject: str, seq: int) -> None:
        log_ = self.broker.logs[subject]
        for i in range(min(seq - 1, len(log_))):
            log_[i] = None  # positions stay; readers skip purged messages
        self.broker.purged += 1

    async def subscribe(self, subject: str, handler: Handler) -> object:
        self.broker._n += 1
        token = (subject, self.broker._n)
        self.broker.subs[subject].append((self.broker._n, handler))
        self.mine.append(token)
        return token

    async def consume(
        self, subject: str, handler: PosHandler, start: int | None = None, timeout: float | None = None
    ) -> object:
        log_ = self.broker.logs[subject]
        pos = [len(log_) if start is None else max(0, start - 1)]
        loop = asyncio.get_running_loop()

        def deliver(_data: bytes) -> None:
            while pos[0] < len(log_):  # every stored message in order (a live publish is already in the log)
                pos[0] += 1
                if log_[pos[0] - 1] is not None:  # None: purged
                    _guarded2(handler, log_[pos[0] - 1], pos[0])

        if pos[0] < len(log_):
            loop.call_soon(deliver, b"")
        return await self.subscribe(subject, deliver)

    async def unsubscribe(self, token: object) -> None:
        subject, n = token  # type: ignore[misc]
        subs = self.broker.subs.get(subject, [])
        subs[:] = [(k, h) for k, h in subs if k != n]

    async def claim(self, key: str, term: int) -> bool:
        if self.broker.terms.get(key, 0) >= term:
            return False
        self.broker.terms[key] = term
        return True

    async def current_term(self, key: str) -> int:
        return self.broker.terms.get(key, 0)

    async def last_position(self, subject: str) -> int:
        return len(self.broker.logs[subject])

    async def close(self) -> None:
        self.closed = True
        for token in self.mine:
            await self.unsubscribe(token)
        self.mine.clear()


def _guarded(h: Handler, data: bytes) -> None:
    try:
        h(data)
    except Exception:
        log.exception("message handler failed")


def _guarded2(h: PosHandler, data: bytes, pos: int) -> None:
    try:
        h(data, pos)
    except Exception:
        log.exception("message handler failed")


class _InlineQueue(asyncio.Queue):
    """Stands in for a nats-py subscription's message queue: ``put_nowait`` (what nats-py's reader calls for each
    message) hands the message to ``fn`` at once; nothing is ever queued, so the subscription's own task waits
    for ever (it is cancelled with the subscription)."""

    def __init__(self, sub: Subscription, fn: Callable[[object], None]) -> None:
        super().__init__()
        self._sub = sub
        self._fn = fn

    def put_nowait(self, msg: Msg) -> None:
        self._sub._pending_size -= len(msg.data)
        try:
            self._fn(msg)
        except Exception:
            log.exception("message handler failed")


class NoBrokerError(ConnectionError):
    """No NATS broker could be reached (or it refused this client's credentials)."""


def stream_names(ns: str, clients: int = 1) -> dict[str, str]:
    """JetStream stream names of a deployment (namespace ``ns``) and the subjects each keeps: the inboxes, the
    replication logs and one task-event stream per client identity (so a client's permissions can name the one
    stream it may read)."""
    base = _BAD.sub("_", ns).upper() or "_"
    n = _BAD.sub("_", ns) or "_"
    out = {f"MEGHA_{base}_Q": f"{n}.q.>", f"MEGHA_{base}_R": f"{n}.r.>"}
    for k in range(max(1, clients)):
        out[events_stream(ns, k)] = f"{n}.ev.{k}"
    return out


def events_stream(ns: str, client: int) -> str:
    """Name of the stream keeping the task events of client identity ``client``."""
    return f"MEGHA_{_BAD.sub('_', ns).upper() or '_'}_EV{int(client)}"


def private_inbox(user: str) -> str:
    """Reply-subject prefix of a client identity (its permissions allow subscribing under it only)."""
    return "_INBOX." + (_BAD.sub("_", user) or "_")


def terms_bucket(ns: str) -> str:
    """The name of namespace ``ns``'s key-value bucket of terms (leadership claims)."""
    return f"MEGHA_{_BAD.sub('_', ns).upper() or '_'}_TERMS"


class _Consumer:
    """One durable subject read from a stream position (an ephemeral push consumer, re-created at the position
    after the last handled message whenever the connection comes back or a delivery is missing)."""

    def __init__(self, tr: NatsTransport, subject: str, handler: PosHandler, start: int | None) -> None:
        self.tr = tr
        self.subject = subject
        self.stream = tr.stream_of(subject)
        self.handler = handler
        self.next = start  # stream position to start from (None: new messages only)
        self.dseq = 0
        self.sub = None
        self.consumer = ""
        self.closed = False
        self._gen: object = None
        self._lock = asyncio.Lock()

    async def open(self, timeout: float | None = None) -> None:
        """(Re-)create the consumer; ``timeout`` bounds the broker's answer (default: the transport's)."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        async with self._lock:
            if self.closed:
                return
            await self._drop()
            nc = self.tr.nc
            inbox = nc.new_inbox()
            self.dseq = 0
            gen = self._gen = object()

            def on_msg(msg: Msg, gen: int = gen) -> None:
                if gen is self._gen:
                    self._on_msg(msg)

            self.sub = await self.tr._subscribe(inbox, on_msg)
            if self.next is None:
                policy = dict(deliver_policy=DeliverPolicy.NEW)
            else:
                policy = dict(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, self.next))
            cfg = ConsumerConfig(
                ack_policy=AckPolicy.NONE,
                deliver_subject=inbox,
                filter_subject=self.subject,
                inactive_threshold=30.0,
                **policy,
            )
            info = await self.tr.js.add_consumer(self.stream, cfg, timeout=timeout or self.tr.request_timeout)
            self.consumer = info.name
            if self.next is None:  # from now on, resume where we are
                self.next = int(info.delivered.stream_seq) + 1

    async def _drop(self) -> None:
        if self.sub is not None:
            with contextlib.suppress(Exception):
                await self.sub.unsubscribe()
            self.sub = None
        if self.consumer:
            name, self.consumer = self.consumer, ""
            with contextlib.suppress(Exception):
                await self.tr.js.delete_consumer(self.stream, name)

    def _on_msg(self, msg: Msg) -> None:
        reply = msg.reply or ""
        if not reply.startswith("$JS.ACK."):
            return  # a status message (heartbeat, flow control)
        t = reply.split(".")
        k = 5 if len(t) == 9 else 7
        try:
            sseq, dseq = int(t[k]), int(t[k + 1])
        except (IndexError, ValueError):
            return
        if dseq != self.dseq + 1 and self.dseq:  # a delivery went missing: read again from where we are
            self.tr.counters["consumer_gaps"] += 1
            self.tr.schedule_reopen(self)
            return
        self.dseq = dseq
        if self.next is not None and sseq < self.next:
            return
        self.next = sseq + 1
        data = msg.data
        if data[:1] == BUNDLE_MARK:
            parts = unpack_bundle(data)
            if parts is not None:
                # each part at the bundle's position; ``more_at_pos`` tells a receiver that parts still follow at
                # it (a successor must read this position again, dropping the parts handled as duplicates)
                last = len(parts) - 1
                tr = self.tr
                try:
                    for i, part in enumerate(parts):
                        tr.more_at_pos = i < last
                        _guarded2(self.handler, part, sseq)
                finally:
                    tr.more_at_pos = False
                return
        _guarded2(self.handler, data, sseq)

    async def close(self) -> None:
        self.closed = True
        async with self._lock:
            await self._drop()


class NatsTransport(Transport):
    """A NATS connection (``nats-py``) with bounded connect attempts, JetStream durable subjects and election.

    The first connection is tried for ``give_up_after`` seconds (``None``: for ever, as services do), each
    attempt bounded by ``connect_timeout``; then nats-py reconnects by itself and buffers publishes meanwhile.
    Durable publishes are kept until the broker acknowledges them (each one) and re-published after a
    reconnection, after an error reply, or when unacknowledged for ``ack_timeout``; receivers put them back in
    order and drop the duplicates by sequence number.
    """

    name = "nats"

    def __init__(
        self,
        url: str = "nats://127.0.0.1:4222",
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        client_name: str = "megha",
        connect_timeout: float = 2.0,
        max_backoff: float = 5.0,
        give_up_after: float | None = 60.0,
        ns: str = "megha",
        tls: object = None,
        ack_timeout: float = 2.0,
        credentials: Callable[[], dict | None] | None = None,
        clients: int = 1,
        private: bool = False,
        direct: bool = True,
        bundle: bool = True,
    ) -> None:
        self.url = url
        self.private = private  # reply subjects under the identity's own prefix (a client identity)
        self.client_id = 0  # client identity named by the credentials
        self.credentials = credentials  # re-read before every connection attempt (they may appear later)
        self.user = user or None
        self.password = password or None
        self.token = token or None
        self.client_name = client_name
        self.connect_timeout = connect_timeout
        self.max_backoff = max_backoff
        self.give_up_after = give_up_after
        self.ns = ns
        self.tls = tls
        self.ack_timeout = ack_timeout
        self.request_timeout = 5.0
        self.nc = None
        self.js = None
        self._streams = stream_names(ns, clients)
        self._prefixes = [(subj[:-1], name) for name, subj in self._streams.items() if subj.endswith(">")]
        self._exact = {subj: name for name, subj in self._streams.items() if not subj.endswith(">")}
        self._out: deque[tuple[str, bytes, int]] = deque()  # subject, data, outbox id (0: core)
        self._wake = asyncio.Event()
        self._writer: asyncio.Task | None = None
        # id -> subject, data, stream, sent at, connection generation it was written in
        self._outbox: dict[int, tuple[str, bytes, str, float, int]] = {}
        self._extra: dict[int, tuple] = {}  # id -> headers, on_ack (the few publishes that have them)
        self._gen = 0
        self._n = 0
        self._acked_sent = 0.0  # latest write time of a durable message the broker acknowledged
        self.direct = direct  # write to the socket and read from it without nats-py's tasks (see _write_now)
        # durable messages of one loop iteration, per subject (first-published subject first), published as one
        # bundle per subject at the end of the iteration (see publish_durable)
        self.bundle = bundle
        self._pend: dict[str, list[bytes]] = {}
        self._pend_armed = False
        self.more_at_pos = False  # a consumer is handing over a bundle's part and more parts follow at its position
        self._flush_armed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ack_prefix = ""
        self._consumers: list[_Consumer] = []
        self._kv = None
        self.attempts = 0
        self.disconnects = 0
        self._closing = False
        self._since = 0.0
        self.counters: Counter = Counter()
        self._bg: set[asyncio.Task] = set()
        self._refused_since: float | None = None  # reconnecting: since when the broker refuses our credentials
        self.gave_up = False  # a client closed its connection after its credentials were refused too long
        self.refusal: str | None = None  # the broker's latest permissions violation (a request it left unanswered)
        self._prefix_user: str | None = None  # the identity this connection's reply subjects belong to

    def stream_of(self, subject: str) -> str:
        """The JetStream stream that keeps ``subject`` (by exact subject, then by prefix)."""
        name = self._exact.get(subject)
        if name is not None:
            return name
        for prefix, name in self._prefixes:
            if subject.startswith(prefix):
                return name
        raise ValueError(f"{subject} is not a durable subject of deployment {self.ns!r}")

    def _user(self) -> str | None:
        """The user name of a reconnection's CONNECT (nats-py calls this at every reconnection)."""
        self._refresh_credentials()
        if self.private and self.user != self._prefix_user:
            log.error(
                "credentials now name %s, but this connection's replies go to %s's inbox: reconnect as %s",
                self.user,
                self._prefix_user,
                self._prefix_user,
            )
        return self.user

    def _password(self) -> str | None:
        return self.password

    def _refresh_credentials(self) -> None:
        if self.credentials is not None:
            c = self.credentials()
            if c is not None:
                self.user, self.password = c["user"], c["password"]
                self.client_id = int(c.get("client", 0) or 0)

    async def _connect_once(self) -> NatsClient:
        """One connection attempt, bounded by ``connect_timeout`` per step; raises on failure.

        nats-py retries inside ``connect`` for ever when reconnection is allowed, with the credentials it was given
        (so a client that started before its credentials were written retried without them until the broker's
        "Authorization Violation" ended the test), and on Python 3.11 an ``asyncio.wait_for`` around it cannot
        always stop it: a cancellation that arrives as nats-py's own inner ``wait_for`` completes is swallowed. So
        the first connection is made with reconnection off (one attempt, which ends by itself); reconnection is
        turned on once connected; credentials are given as callables, re-read from the state directory before
        every CONNECT (a reconnection after a broker restart, or after ``up`` wrote new ones, uses the current
        ones)."""
        from nats.aio.client import Client

        # One identity for the whole attempt: the user name sent in CONNECT and the reply-subject prefix must agree
        # (a client identity may subscribe under its own ``_INBOX.<user>`` only). Reading the credentials again at
        # CONNECT time, as nats-py does with callables, let a client that started just before ``up`` wrote them
        # pick its prefix without them and connect with them: every JetStream request then went unanswered (the
        # broker refuses the reply subscription) and ``up`` failed after 30 s with "nats: timeout".
        self._refresh_credentials()
        user, password = self.user, self.password
        self._prefix_user = user
        extra = {"inbox_prefix": private_inbox(user or self.client_name)} if self.private else {}
        nc = Client()
        try:
            await nc.connect(
                servers=[self.url],
                user=user,
                password=password,
                token=self.token,
                tls=self.tls,
                name=self.client_name,
                connect_timeout=self.connect_timeout,
                allow_reconnect=False,
                max_reconnect_attempts=1,  # else nats-py's server selection retries a refused connection for ever
                reconnect_time_wait=0.25,
                pending_size=64 * 1024 * 1024,
                error_cb=self._on_error,
                disconnected_cb=self._on_disconnect,
                reconnected_cb=self._on_reconnect,
                flusher_queue_size=4096,
                **extra,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await nc.close()
            raise
        # from now on nats-py reconnects by itself, for ever (both options are read at each disconnection), with the
        # credentials read again before every CONNECT (a restarted supervisor may have renewed them)
        nc.options["allow_reconnect"] = True
        nc.options["max_reconnect_attempts"] = -1
        if self.credentials is not None or self.user is not None:
            nc.options["user"] = self._user
            nc.options["password"] = self._password
        return nc

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        delay = 0.05
        last = None
        while True:
            self.attempts += 1
            try:
                self.nc = await self._connect_once()
                break
            except Exception as e:
                last = e
                if self.give_up_after is not None and loop.time() - t0 + delay > self.give_up_after:
                    if "uthoriz" in str(e):
                        raise NoBrokerError(
                            f"the NATS broker at {self.url} refused this client's credentials ({e})"
                        ) from None
                    raise NoBrokerError(
                        f"no NATS broker reachable at {self.url} after {loop.time() - t0:.0f} s "
                        f"({type(last).__name__}: {last or 'timed out'})"
                    ) from None
                wait = delay * (1 + random.random() * 0.5)
                log.warning("NATS %s not reachable (%s: %s); retrying in %.2f s", self.url, type(e).__name__, e, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.max_backoff)
        self._since = time.monotonic()
        self.js = self.nc.jetstream(timeout=self.request_timeout)
        self._ack_prefix = self.nc.new_inbox()
        self._loop = asyncio.get_running_loop()
        self.direct = self.direct and _nats_internals_ok(self.nc)
        await self._subscribe(self._ack_prefix + ".*", self._on_ack)
        self._writer = asyncio.create_task(self._write_loop())
        self._spawn(self._retry_loop())

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        t = asyncio.ensure_future(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    async def _on_error(self, e: Exception) -> None:
        log.warning("NATS error: %s: %s", type(e).__name__, e)
        if "ermissions violation" in str(e):
            self.refusal = str(e).removeprefix("nats: ")
        if self.nc is None or self._closing or self.connected or "uthoriz" not in str(e):
            return
        # reconnecting, and the broker refuses this identity: nats-py would try for ever. Credentials are re-read
        # before every attempt (they may be renewed); a client (``give_up_after`` set) stops after that long
        now = time.monotonic()
        if self._refused_since is None:
            self._refused_since = now
            log.error("the NATS broker at %s refuses this client's credentials; retrying with fresh ones", self.url)
        if self.give_up_after is not None and now - self._refused_since > self.give_up_after:
            log.error(
                "credentials refused for %.0f s: closing the connection to %s", now - self._refused_since, self.url
            )
            self.gave_up = True
            self._spawn(self.nc.close())

    async def _on_disconnect(self) -> None:
        self.disconnects += 1
        self._gen += 1  # what was written before may be lost: acknowledgements no longer vouch for it
        if self._closing or self.nc is None:  # closing, or a first connection attempt that failed
            return
        log.warning("NATS connection lost; reconnecting with backoff")

    async def _on_reconnect(self) -> None:
        log.warning("NATS connection re-established")
        self._refused_since = None
        self._since = time.monotonic()
        self._spawn(self._after_reconnect())

    async def _after_reconnect(self) -> None:
        self._republish(0.0)
        for c in list(self._consumers):
            await self._reopen(c)
        self._fire_reconnect()

    def schedule_reopen(self, c: _Consumer) -> None:
        """Re-create the durable consumer ``c`` at its position, retrying in the background until it works or closes."""
        self._spawn(self._reopen(c))

    async def _reopen(self, c: _Consumer) -> None:
        delay = 0.1
        while not c.closed and not self._closing:
            try:
                await c.open()
                return
            except Exception as e:  # JetStream not ready yet after a broker restart
                log.warning("re-opening %s failed (%s: %s); retrying", c.subject, type(e).__name__, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    # --- publishing ----------------------------------------------------------------------------------------
    def publish(self, subject: str, data: bytes) -> None:
        if self._pend:  # durable messages published before this one leave before it
            self._flush_bundles(write=False)
        if self._out or not self._write_now(subject, data, "", None):
            self._out.append((subject, data, 0))
            self._wake.set()

    def _write_now(self, subject: str, data: bytes, reply: str, headers: dict[str, str] | None) -> bool:
        """Put one message in nats-py's outgoing buffer without its coroutine, and have the buffer written at the
        end of this loop iteration (:meth:`_flush_direct`): every message a batch of incoming ones produced leaves
        in one write, one iteration later. nats-py's own publish hands the buffer to a flusher task, and the
        transport's queue to a writer task before that: two task switches per hop, each with its own iteration.
        False (the caller queues it for the writer task instead): messages are queued already (they keep their
        order), the connection is down (nats-py buffers while it reconnects) or its buffer holds a backlog."""
        nc = self.nc
        if not self.direct or nc is None or nc._status != _CONNECTED or nc._pending_data_size > _DIRECT_MAX_BUFFER:
            return False
        if len(data) > nc._max_payload:
            return False  # nats-py raises MaxPayloadError: let the writer report it
        if headers:
            hdr = _NATS_HDR + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n"
            cmd = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
                subject.encode(),
                reply.encode(),
                len(hdr),
                len(hdr) + len(data),
                hdr,
                data,
            )
        else:
            cmd = b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), len(data), data)
        nc._pending.append(cmd)
        nc._pending_data_size += len(cmd)
        if not self._flush_armed:
            self._flush_armed = True
            self._loop.call_soon(self._flush_direct)
        return True

    def _flush_direct(self) -> None:
        """Write nats-py's outgoing buffer to the socket (what its flusher task does, without the task); with a
        full socket buffer, leave it to the flusher, which waits for the socket to drain."""
        self._flush_armed = False
        nc = self.nc
        if nc is None or nc._status != _CONNECTED or not nc._pending:
            return  # reconnecting: nats-py writes its buffer once connected again
        w = getattr(nc._transport, "_io_writer", None)
        tr = getattr(w, "transport", None)
        if tr is None or tr.is_closing() or tr.get_write_buffer_size() > _DIRECT_MAX_BUFFER:
            q = nc._flush_queue
            if q is not None and q.empty():
                with contextlib.suppress(asyncio.QueueFull):
                    q.put_nowait(self._loop.create_future())
            return
        try:
            w.writelines(nc._pending)
        except Exception as e:  # the connection is going away: nats-py's reconnection takes it from here
            log.warning("writing to the broker failed: %s", e)
            return
        nc._pending = []
        nc._pending_data_size = 0

    def publish_durable(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None, on_ack: OnAck | None = None
    ) -> None:
        """See :meth:`Transport.publish_durable`. Without ``headers`` and ``on_ack`` (every message but the replication
        log's batches), messages are held until the end of the loop iteration and those of one subject leave as one
        bundle (:func:`~megha.live.wire.pack_bundle`): one broker store, acknowledgement and delivery for every message
        a batch of incoming ones produced for that destination, instead of one each. Subjects keep the order in which
        they were first published to; a core message or a durable one with headers sends the held ones first."""
        if self.bundle and headers is None and on_ack is None:
            held = self._pend.get(subject)
            if held is None:
                self._pend[subject] = [data]
                if not self._pend_armed:
                    self._pend_armed = True
                    (self._loop or asyncio.get_running_loop()).call_soon(self._flush_bundles)
            else:
                held.append(data)
            return
        if self._pend:
            self._flush_bundles(write=False)
        self._publish_one(subject, data, headers, on_ack)

    def _flush_bundles(self, write: bool = True) -> None:
        """Publish the held durable messages, one bundle per subject (a lone message as itself); ``write``: then write
        nats-py's buffer to the socket (the end of the loop iteration)."""
        self._pend_armed = False
        pend, self._pend = self._pend, {}
        armed = self._flush_armed
        if write:  # the buffer is written below: no separate write one iteration later
            self._flush_armed = True
        for subject, datas in pend.items():
            if len(datas) == 1:
                self._publish_one(subject, datas[0], None, None)
                continue
            self.counters["bundled"] += len(datas)
            part: list[bytes] = []
            size = 0
            for d in datas:
                if part and (size + len(d) > BUNDLE_MAX_BYTES or len(part) >= MAX_BUNDLE):
                    self._publish_one(subject, pack_bundle(part) if len(part) > 1 else part[0], None, None)
                    part, size = [], 0
                part.append(d)
                size += len(d) + 5
            self._publish_one(subject, pack_bundle(part) if len(part) > 1 else part[0], None, None)
        if write:
            self._flush_direct()
            self._flush_armed = armed  # a write already scheduled still runs (and finds the buffer empty)

    def _publish_one(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None, on_ack: OnAck | None = None
    ) -> None:
        self._n += 1
        # generation -1: queued, not written yet (the writer stamps the time and generation when it writes it)
        self._outbox[self._n] = (subject, data, self.stream_of(subject), time.monotonic(), -1)
        if headers or on_ack is not None:
            self._extra[self._n] = (headers, on_ack)
        if not self._out and self._write_now(subject, data, f"{self._ack_prefix}.{self._n}", headers):
            self._outbox[self._n] = (subject, data, self._outbox[self._n][2], time.monotonic(), self._gen)
            return
        self._out.append((subject, data, self._n))
        self._wake.set()

    def _on_ack(self, msg: Msg) -> None:
        try:
            n = int(msg.subject.rsplit(".", 1)[1])
        except ValueError:
            return
        d = msg.data
        if not d or b'"error"' in d or b'"seq"' not in d:
            ex = self._extra.get(n)
            if ex is not None and b"wrong last sequence" in d and self._outbox.pop(n, None) is not None:
                del self._extra[n]  # refused for good: the subject moved on (another writer)
                if ex[1] is not None:
                    ex[1](None, d.decode(errors="replace")[:200])
                return
            # not stored (JetStream still starting after a broker restart, no stream): publish it again soon
            self.counters["publish_errors"] += 1
            ent = self._outbox.get(n)
            if ent is not None:
                self._outbox[n] = (*ent[:3], -1e9, ent[4])
            return
        ent = self._outbox.pop(n, None)
        if ent is not None and ent[3] > self._acked_sent:
            self._acked_sent = ent[3]
        if ent is not None and self._extra:
            ex = self._extra.pop(n, None)
            if ex is not None and ex[1] is not None:
                try:
                    seq = int(json.loads(d)["seq"])
                except (ValueError, KeyError, TypeError):
                    seq = 0
                ex[1](seq, None)

    def _republish(self, older_than: float, evidence: bool = False) -> None:
        """Queue again the durable messages written at least ``older_than`` seconds ago and not acknowledged.

        A message still queued (never written) is left alone: it is on its way already. (Before, a message queued
        while the writer had not yet run was taken for unacknowledged since time 0 and written twice: a fault-free
        bench run re-published 17-98 messages, and receivers dropped as many duplicates.) ``evidence``: only those
        written before a message that was acknowledged since (the broker answered later writes, so no answer is
        coming for these), or unanswered for ``UNANSWERED_FACTOR`` times ``older_than`` (no traffic to compare
        with); a loop that is merely slow to read its acknowledgements under load re-publishes nothing."""
        now = time.monotonic()
        ob = self._outbox
        if evidence:
            seen, late = self._acked_sent, older_than * UNANSWERED_FACTOR
            again = [
                k
                for k, v in ob.items()
                if v[4] != -1 and (now - v[3] >= late or (now - v[3] >= older_than and v[3] < seen))
            ]
        else:
            again = [k for k, v in ob.items() if v[4] != -1 and now - v[3] >= older_than]
        if not again:
            return
        again.sort()
        self.counters["republished"] += len(again)
        for k in again:
            v = ob[k]
            ob[k] = (v[0], v[1], v[2], now, -1)
            self._out.append((v[0], v[1], k))
        self._wake.set()

    async def _retry_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(min(0.25, self.ack_timeout / 2))
            if self.connected and self._outbox:
                self._republish(self.ack_timeout, evidence=True)

    async def _write_loop(self) -> None:
        from nats.errors import OutboundBufferLimitError

        out = self._out
        ob = self._outbox
        while True:
            await self._wake.wait()
            self._wake.clear()
            while out:
                subject, data, k = out[0]
                reply = ""
                if k:
                    ent = ob.get(k)
                    if ent is None:  # acknowledged meanwhile
                        out.popleft()
                        continue
                    # every durable message asks for the broker's acknowledgement: an acknowledgement vouches for
                    # its own message only (one published while JetStream was still starting is not stored)
                    ob[k] = (ent[0], ent[1], ent[2], time.monotonic(), self._gen)
                    reply = f"{self._ack_prefix}.{k}"
                    ex = self._extra.get(k) if self._extra else None
                    headers = ex[0] if ex is not None else None
                else:
                    headers = None
                try:
                    await self.nc.publish(subject, data, reply=reply, headers=headers)
                except OutboundBufferLimitError:
                    await asyncio.sleep(0.05)  # reconnecting with a full buffer: wait, keep order
                    continue
                except Exception as e:
                    if self.nc is None or self.nc.is_closed:
                        return
                    log.warning("publish to %s failed: %s", subject, e)
                out.popleft()

    # --- subscribing ---------------------------------------------------------------------------------------
    async def subscribe(self, subject: str, handler: Handler) -> object:
        return await self._subscribe(subject, lambda msg: handler(msg.data))

    async def _subscribe(self, subject: str, fn: Callable[[object], None]) -> object:
        """Subscribe with a synchronous ``fn(msg)``. With :attr:`direct`, ``fn`` runs as nats-py's reader hands the
        message over (the subscription's queue is replaced by one that calls it), not one loop iteration later in
        the subscription's own task: one fewer task switch per message received."""

        async def cb(msg: Msg) -> None:
            _guarded(fn, msg)

        sub = await self.nc.subscribe(
            subject, cb=cb, pending_msgs_limit=1_000_000, pending_bytes_limit=512 * 1024 * 1024
        )
        if (
            self.direct
            and isinstance(getattr(sub, "_pending_queue", None), asyncio.Queue)
            and hasattr(sub, "_pending_size")
        ):
            # nothing was queued yet: no message arrives before this coroutine next yields to the loop
            sub._pending_queue = _InlineQueue(sub, fn)
        return sub

    async def consume(
        self, subject: str, handler: PosHandler, start: int | None = None, timeout: float | None = None
    ) -> object:
        """See :meth:`Transport.consume`; ``timeout`` defaults to ``give_up_after`` (30 s for a service, which
        retries its connection for ever). Each JetStream request is bounded by what is left of it, and the error
        names what the broker said last (a permissions violation, no JetStream, no answer)."""
        budget = timeout if timeout is not None else (self.give_up_after if self.give_up_after is not None else 30.0)
        c = _Consumer(self, subject, handler, start)
        self._consumers.append(c)
        delay = 0.1
        t0 = time.monotonic()
        end = t0 + budget
        while True:
            try:
                await c.open(timeout=max(0.5, min(self.request_timeout, end - time.monotonic())))
                return c
            except Exception as e:
                if time.monotonic() + delay >= end:
                    self._consumers.remove(c)
                    with contextlib.suppress(Exception):
                        await c.close()
                    raise ConnectionError(self._consume_failure(subject, c.stream, time.monotonic() - t0, e)) from e
                log.info("reading %s from stream %s failed (%s: %s); retrying", subject, c.stream, type(e).__name__, e)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 1.0)

    def _consume_failure(self, subject: str, stream: str, secs: float, e: Exception) -> str:
        what = f"cannot read {subject} from the broker's stream {stream} (tried for {secs:.0f} s)"
        who = f"identity {self._prefix_user}" if self._prefix_user else "this connection (no credentials)"
        if self.refusal is not None:
            return f"{what}: the broker at {self.url} refused a request of {who}: {self.refusal}"
        text = str(e) or type(e).__name__
        if "timeout" in text.lower() or isinstance(e, TimeoutError):
            return (
                f"{what}: the broker at {self.url} never answered the JetStream request ({text}); it is overloaded, "
                "JetStream is off, or its permissions drop the request silently"
            )
        if "no responders" in text.lower():
            return f"{what}: JetStream is not enabled (or not ready) on the broker at {self.url} ({text})"
        if "not found" in text.lower():
            return f"{what}: the stream does not exist (the deployment's streams were never created?) ({text})"
        return f"{what}: {type(e).__name__}: {text}"

    async def unsubscribe(self, token: object) -> None:
        if isinstance(token, _Consumer):
            if token in self._consumers:
                self._consumers.remove(token)
            await token.close()
            return
        with contextlib.suppress(Exception):
            await token.unsubscribe()  # type: ignore[attr-defined]

    # --- streams and election ------------------------------------------------------------------------------
    async def ensure_streams(self, reset: bool = False) -> None:
        """Create this deployment's streams (``reset``: empty them first: a new deployment)."""
        from nats.js.api import DiscardPolicy, StorageType, StreamConfig
        from nats.js.errors import NotFoundError

        for name, subj in self._streams.items():
            if reset:
                with contextlib.suppress(NotFoundError):
                    await self.js.delete_stream(name)
            cfg = StreamConfig(
                name=name,
                subjects=[subj],
                storage=StorageType.FILE,
                discard=DiscardPolicy.OLD,
                max_age=0 if name.endswith("_R") else 24 * 3600.0,
                max_bytes=-1,
            )
            try:
                await self.js.add_stream(cfg)
            except Exception as e:
                if "already in use" not in str(e):
                    raise
        if reset:
            with contextlib.suppress(Exception):
                await self.js.delete_key_value(terms_bucket(self.ns))
        await self._terms()

    async def _terms(self) -> KeyValue:
        if self._kv is None:
            try:
                self._kv = await self.js.key_value(terms_bucket(self.ns))
            except Exception:
                self._kv = await self.js.create_key_value(bucket=terms_bucket(self.ns), history=1)
        return self._kv

    async def current_term(self, key: str) -> int:
        from nats.js.errors import KeyNotFoundError

        kv = await self._terms()
        try:
            e = await kv.get(key)
        except KeyNotFoundError:
            return 0
        return int(e.value or b"0")

    async def claim(self, key: str, term: int) -> bool:
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        kv = await self._terms()
        try:
            e = await kv.get(key)
            cur, rev = int(e.value or b"0"), e.revision
        except KeyNotFoundError:
            cur, rev = 0, None
        if cur >= term:
            return False
        try:
            if rev is None:
                await kv.create(key, str(term).encode())
            else:
                await kv.update(key, str(term).encode(), last=rev)
        except (KeyWrongLastSequenceError, Exception) as e:
            if isinstance(e, KeyWrongLastSequenceError) or "wrong last sequence" in str(e) or "exists" in str(e):
                return False
            raise
        return True

    def purge_before(self, subject: str, seq: int) -> None:
        async def go() -> None:
            try:
                await self.js.purge_stream(self.stream_of(subject), seq=seq, subject=subject)
                self.counters["purges"] += 1
            except Exception as e:  # the next compaction purges these too
                log.warning("purging %s before %d failed: %s", subject, seq, e)

        self._spawn(go())

    async def last_position(self, subject: str) -> int:
        from nats.js.errors import NotFoundError

        try:
            m = await self.js.get_last_msg(self.stream_of(subject), subject)
        except NotFoundError:
            return 0
        return int(m.seq or 0)

    async def flush(self, timeout: float = 2.0) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        if self._pend:
            self._flush_bundles()
        while (self._out or self._outbox) and loop.time() < end:
            await asyncio.sleep(0.002)
        if self.nc is not None and self.nc.is_connected:
            with contextlib.suppress(Exception):
                await self.nc.flush(timeout=max(0.1, end - loop.time()))

    async def close(self) -> None:
        self._closing = True
        if self._writer is not None:
            try:
                await self.flush(1.0)
            finally:
                self._writer.cancel()
        for t in list(self._bg):
            t.cancel()
        for c in list(self._consumers):
            with contextlib.suppress(Exception):
                await c.close()
        self._consumers.clear()
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.close()

    @property
    def connected(self) -> bool:
        return self.nc is not None and self.nc.is_connected

    @property
    def connected_since(self) -> float:
        return self._since
