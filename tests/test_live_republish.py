"""The NATS transport re-publishes a durable message only when its acknowledgement is overdue, never one that is
still queued, and (from its periodic check) only with evidence that no answer is coming. No broker needed: the
outbox bookkeeping is exercised directly."""

from __future__ import annotations

import time

from megha.live.transport import UNANSWERED_FACTOR, NatsTransport


def _transport() -> NatsTransport:
    # one publish, one outbox entry (bundles are formed at the end of a loop iteration; there is no loop here)
    return NatsTransport("nats://127.0.0.1:1", ns="t", ack_timeout=2.0, bundle=False)


def _written(tr: NatsTransport, k: int, at: float) -> None:
    """What the writer does when it writes message ``k``: stamp its time and the connection generation."""
    ent = tr._outbox[k]
    tr._outbox[k] = (ent[0], ent[1], ent[2], at, tr._gen)
    assert tr._out[0][2] == k
    tr._out.popleft()


def test_a_queued_message_is_never_republished():
    tr = _transport()
    tr.publish_durable("t.q.megha.gm0", b"x")
    # fault-free: the periodic check runs before the writer did (before the fix: re-published, as if sent at 0)
    tr._republish(tr.ack_timeout, evidence=True)
    tr._republish(0.0)  # nor after a reconnection: it is still in the queue, to be written once
    assert tr.counters["republished"] == 0
    assert len(tr._out) == 1


def test_overdue_only_with_evidence():
    tr = _transport()
    now = time.monotonic()
    tr.publish_durable("t.q.megha.gm0", b"a")
    tr.publish_durable("t.q.megha.gm0", b"b")
    _written(tr, 1, now - 3.0)
    _written(tr, 2, now - 2.5)
    # overdue, but nothing written after them was answered: a slow loop, not a loss
    tr._republish(tr.ack_timeout, evidence=True)
    assert tr.counters["republished"] == 0
    # the broker answered a later write: the first two were lost
    tr.publish_durable("t.q.megha.gm0", b"c")
    _written(tr, 3, now - 0.1)
    tr._acked_sent = now - 0.1
    del tr._outbox[3]
    tr._republish(tr.ack_timeout, evidence=True)
    assert tr.counters["republished"] == 2
    assert [k for _, _, k in tr._out] == [1, 2]
    # queued again: not re-published a second time before the writer wrote them
    tr._republish(0.0)
    assert tr.counters["republished"] == 2


def test_unanswered_for_long_is_republished_without_evidence():
    tr = _transport()
    tr.publish_durable("t.q.megha.gm0", b"a")
    _written(tr, 1, time.monotonic() - tr.ack_timeout * UNANSWERED_FACTOR - 0.1)
    tr._republish(tr.ack_timeout, evidence=True)
    assert tr.counters["republished"] == 1


def test_reconnection_republishes_every_written_message():
    tr = _transport()
    tr.publish_durable("t.q.megha.gm0", b"a")
    tr.publish_durable("t.q.megha.gm0", b"b")
    _written(tr, 1, time.monotonic())
    tr._republish(0.0)
    assert tr.counters["republished"] == 1
    assert [k for _, _, k in tr._out] == [2, 1]
