from __future__ import annotations

import numpy as np

from megha.sim.component import Component, RecordingPort
from megha.sim.engine import DelayModel, Engine, ProcessingModel


class Logger(Component):
    kind = "logger"

    def __init__(self, address, log):
        super().__init__(address)
        self.log = log

    def on_message(self, msg, now):
        self.log.append((round(now, 9), self.address, msg))

    def on_timer(self, key, now):
        self.log.append((round(now, 9), self.address, f"timer:{key}"))


class Sender(Component):
    kind = "sender"

    def __init__(self, address, plan):
        super().__init__(address)
        self.plan = plan

    def on_start(self, now):
        for dst, msg in self.plan:
            self.port.send(dst, msg)


def test_time_then_insertion_order():
    log = []
    e = Engine(delay_model=DelayModel(network_delay=0.001))
    e.add(Logger("a", log))
    e.add(Sender("s", [("a", 1), ("a", 2), ("a", 3)]))
    e.inject(0.001, "a", "injected")  # same time, inserted before the sends
    e.run()
    assert [m for _, _, m in log] == ["injected", 1, 2, 3]
    assert {t for t, _, _ in log} == {0.001}


def test_timers_and_cancellation():
    log = []
    lg = Logger("a", log)
    e = Engine()
    e.add(lg)
    h = lg.port.set_timer(2.0, "x")
    lg.port.set_timer(1.0, "y")
    lg.port.cancel_timer(h)
    e.run()
    assert log == [(1.0, "a", "timer:y")]


def test_link_overrides():
    dm = DelayModel(network_delay=0.5, links={("sender", "logger"): 0.0, ("*", "other"): 2.0})
    assert dm.delay("sender", "logger") == 0.0
    assert dm.delay("x", "other") == 2.0
    assert dm.delay("x", "y") == 0.5


def test_processing_cost_queues_messages():
    log = []
    e = Engine(delay_model=DelayModel(0.0), processing=ProcessingModel(base={"logger": 1.0}))
    e.add(Logger("a", log))
    e.add(Sender("s", [("a", i) for i in range(3)]))
    e.run()
    assert [t for t, _, _ in log] == [0.0, 1.0, 2.0]


class Chatty(Component):
    kind = "chatty"

    def __init__(self, address, peers, out):
        super().__init__(address)
        self.peers = peers
        self.out = out

    def on_start(self, now):
        self.port.set_timer(float(self.port.rng.random()), "go")

    def on_timer(self, key, now):
        if now < 5:
            dst = self.peers[int(self.port.rng.integers(len(self.peers)))]
            self.port.send(dst, float(self.port.rng.random()))
            self.port.set_timer(float(self.port.rng.exponential(0.3)), "go")

    def on_message(self, msg, now):
        self.out.append((self.address, now, msg))


def _run(seed):
    out = []
    e = Engine(seed=seed)
    names = [f"c{i}" for i in range(4)]
    for n in names:
        e.add(Chatty(n, names, out))
    e.run()
    return out


def test_same_seed_same_run():
    assert _run(3) == _run(3)
    assert _run(3) != _run(4)


def test_recording_port_drives_a_component():
    log = []
    lg = Logger("a", log)
    port = RecordingPort()
    lg.attach(port)
    lg.on_message("hello", 1.5)
    assert log == [(1.5, "a", "hello")]
    assert isinstance(port.rng, np.random.Generator)


class Recovering(Logger):
    def on_recover(self, now):
        self.log.append((round(now, 9), self.address, "recovered"))


class Ticker(Component):
    kind = "ticker"

    def __init__(self, address, log):
        super().__init__(address)
        self.log = log

    def on_start(self, now):
        self.port.set_timer(1.5, "tick")

    def on_timer(self, key, now):
        self.log.append((round(now, 9), self.address, f"timer:{key}"))


def test_a_suspended_component_gets_what_was_held_in_order_after_it_recovers():
    log = []
    e = Engine(delay_model=DelayModel(network_delay=0.001))
    a = e.add(Recovering("a", log))
    t = e.add(Ticker("t", log))
    e.add(Sender("s", [("a", 1), ("a", 2)]))
    e.inject(2.0, "a", 3)
    e.run(until=0.0)
    e.suspend("a")
    e.suspend("t")
    assert e.is_down("a") and e.is_down("t") and not e.is_down("s")
    e.run(until=5.0)
    assert log == []  # nothing reached the crashed components
    assert e.resume("a") == 3 and e.resume("t") == 1
    assert e.resume("a") == 0  # already up
    assert e.components["a"] is a and e.components["t"] is t
    e.run()
    # resumed at the time of the last event run (2.0: the held message)
    assert log == [(2.0, "a", "recovered"), (2.0, "a", 1), (2.0, "a", 2), (2.0, "a", 3), (2.0, "t", "timer:tick")]


def test_messages_sent_after_a_resume_reach_the_component_itself():
    log = []
    e = Engine(delay_model=DelayModel(network_delay=0.001))
    e.add(Logger("a", log))
    e.add(Sender("s", [("a", "early")]))
    e.run(until=0.0)
    e.suspend("a")
    e.run(until=1.0)
    e.resume("a")
    e.inject(2.0, "a", "late")
    e.run()
    assert log == [(0.001, "a", "early"), (2.0, "a", "late")]


class Direct(Component):
    """Takes messages both ways: ``on_message`` and a direct handler (``SimPort.route``)."""

    kind = "direct"

    def __init__(self, address, log):
        super().__init__(address)
        self.log = log

    def on_message(self, msg, now):
        self.log.append((round(now, 9), "msg", msg))

    def on_message_direct(self, payload, now):
        self.log.append((round(now, 9), "direct", payload))


class Router(Component):
    """Sends its plan at start: a payload through the route to ``dst``'s direct handler when there is one, else a
    message."""

    kind = "router"

    def __init__(self, address, plan):
        super().__init__(address)
        self.plan = plan

    def on_start(self, now):
        for dst, x in self.plan:
            self.deliver(dst, x, now)

    def on_timer(self, key, now):
        self.deliver(*key, now)

    def deliver(self, dst, x, now):
        r = self.port.route(dst, "on_message_direct", int)
        if r:
            append, handler, d, nxt, cell, _ = r
            cell[0] += 1
            append((now + d, nxt(), handler, x))
        else:
            self.port.send(dst, x)


def test_a_route_delivers_in_send_order_and_counts_the_message():
    log = []
    e = Engine()
    e.add(Direct("a", log))
    e.add(Router("r", [("a", 1), ("a", 2)]))
    e.add(Sender("s", [("a", 3)]))
    e.run()
    assert log == [(0.0005, "direct", 1), (0.0005, "direct", 2), (0.0005, "msg", 3)]
    assert e.message_counts() == {"int": 3}


def test_no_route_with_a_link_delay_or_a_processing_model_or_without_the_handler():
    for kw in (
        {"delay_model": DelayModel(links={("router", "direct"): 0.002})},
        {"processing": ProcessingModel(base={"direct": 0.001})},
    ):
        log = []
        e = Engine(**kw)
        e.add(Direct("a", log))
        r = e.add(Router("r", []))
        assert r.port.route("a", "on_message_direct", int) is False
    e = Engine()
    e.add(Logger("a", []))
    r = e.add(Router("r", []))
    assert r.port.route("a", "on_message_direct", int) is False


def test_a_route_to_a_suspended_component_is_held_for_its_handler():
    log = []
    e = Engine()
    e.add(Direct("a", log))
    r = e.add(Router("r", [("a", 1)]))
    e.call_at(1.0, r, ("a", 2))
    e.run(until=0.0001)  # the payload 1 is in flight
    e.suspend("a")
    assert e.pending_timers() == [(e.pending_timers()[0][0], r)]  # a routed message is not a timer
    e.run(until=2.0)  # 1 arrives while down; then 2 is sent to the stand-in: a plain message, held too
    assert log == []
    assert e.resume("a") == 2
    e.run()
    assert log == [(1.0005, "direct", 1), (1.0005, "msg", 2)]


class Counter(Component):
    """Re-arms a timer (cancelling a decoy each time) and pings a peer; stops the engine at its ``stop_at``-th event."""

    kind = "counter"

    def __init__(self, address, peer, log, stop_at=None):
        super().__init__(address)
        self.peer = peer
        self.log = log
        self.stop_at = stop_at
        self.engine = None

    def on_start(self, now):
        self.port.set_timer(0.25, 0)

    def on_timer(self, key, now):
        self.tick(now, ("timer", key))
        if key < 20:
            self.port.cancel_timer(self.port.set_timer(0.1, -1))  # a cancelled timer: skipped, not an event
            self.port.set_timer(0.25, key + 1)
            self.port.send(self.peer, key)

    def on_message(self, msg, now):
        self.tick(now, ("msg", msg))

    def tick(self, now, what):
        self.log.append((round(now, 9), self.address, what))
        if self.stop_at is not None and len(self.log) == self.stop_at:
            self.engine.stop()


def _counter_engine(stop_at=None):
    log = []
    e = Engine()
    c = e.add(Counter("c", "d", log, stop_at))
    c.engine = e
    e.add(Logger("d", log))
    return e, log


def test_stop_ends_the_run_after_the_current_event_and_the_next_run_goes_on():
    full_e, full = _counter_engine()
    full_e.run()
    assert full_e.events == len(full) == 41  # 21 timers and 20 messages; the 20 cancelled timers are no events
    e, log = _counter_engine(stop_at=7)
    e.run()
    assert e.events == 7 and log == full[:7] and e.now == log[-1][0]
    e.run()
    assert e.events == 41 and log == full


def test_progress_reports_every_n_events_and_until_stops_at_a_time():
    e, log = _counter_engine()
    seen = []
    e.run(until=2.0, progress=lambda t: seen.append((e.events, t)), progress_every=4)
    assert all(t <= 2.0 for t, _, _ in log) and e.events == len(log) and e.now == log[-1][0]
    assert seen == [(4 * (i + 1), log[4 * i + 3][0]) for i in range(len(log) // 4)]
    e.run()
    full_e, full = _counter_engine()
    full_e.run()
    assert log == full and e.events == full_e.events
