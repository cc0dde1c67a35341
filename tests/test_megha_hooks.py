"""The documented extension hooks of Megha's GM and LM (docs/extending.md), and that the simulator's in-process LM
and the live runtime's masters build on them instead of overriding the masters' private members."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

from megha.live.masters import LiveGlobalMaster, LiveLocalMaster
from megha.metrics.recorder import TaskRecorder
from megha.model.matching import Policy
from megha.model.topology import Datacenter
from megha.schedulers.common.messages import JobArrival, Kill, Launch
from megha.schedulers.megha import gm as gm_module
from megha.schedulers.megha import lm as lm_module
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.lm import LocalMaster
from megha.schedulers.megha.messages import Handoff, LaunchRequest, StateDelta, TaskDone
from megha.schedulers.megha.simlm import SimLocalMaster
from megha.sim import engine
from megha.sim.component import RecordingPort, SimHooks

SUBCLASSES = [(LiveGlobalMaster, GlobalMaster), (LiveLocalMaster, LocalMaster), (SimLocalMaster, LocalMaster)]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _base_private_names(base: type, module) -> set[str]:
    """Private members of ``base``: its class attributes and what its methods assign to ``self._x``."""
    names = {n for n in dir(base) if _private(n)}
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == base.__name__:
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                    and _private(sub.attr)
                ):
                    names.add(sub.attr)
    return names


def _base_methods(base: type) -> set[str]:
    return {n for n in dir(base) if _private(n) and callable(getattr(base, n, None))}


def _self_attrs(cls: type) -> list[ast.Attribute]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    ]


@pytest.mark.parametrize(("sub", "base"), SUBCLASSES, ids=lambda c: c.__name__)
def test_subclasses_override_no_private_member(sub, base):
    """No ``_x`` of the GM/LM is redefined in the subclass's class, rebound on its instances (``self._x = ...``
    for a method of the base), or edited in place (the handler table): the hooks are the only way in."""
    module = gm_module if base is GlobalMaster else lm_module
    private = _base_private_names(base, module)
    for klass in sub.__mro__[: sub.__mro__.index(base)]:
        redefined = sorted(n for n in vars(klass) if n in private)
        assert not redefined, f"{klass.__name__} overrides private member(s) of {base.__name__}: {redefined}"
    methods = _base_methods(base) | {"_handlers"}
    bad = []
    for node in _self_attrs(sub):
        if node.attr in methods and isinstance(node.ctx, ast.Store):
            bad.append(f"self.{node.attr} = ... (line {node.lineno})")
    tree = ast.parse(textwrap.dedent(inspect.getsource(sub)))
    for node in ast.walk(tree):  # self._handlers[...] = ...
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "self"
            and node.value.attr == "_handlers"
        ):
            bad.append(f"self._handlers[...] = ... (line {node.lineno})")
    assert not bad, f"{sub.__name__} rebinds private member(s) of {base.__name__}: {bad}"


@pytest.mark.parametrize(("sub", "base"), SUBCLASSES[:2], ids=lambda c: c.__name__)
def test_live_masters_use_no_private_member_of_the_masters(sub, base):
    """The live runtime (another package) reads or calls nothing private of the GM/LM: only the documented hooks
    and the masters' public state (the simulator's LM, in the same package, inlines the LM's steps and may read)."""
    module = gm_module if base is GlobalMaster else lm_module
    private = _base_private_names(base, module)
    used = sorted({n.attr for n in _self_attrs(sub) if n.attr in private})
    assert not used, f"{sub.__name__} uses private member(s) of {base.__name__}: {used}"


def test_no_private_port_attribute_is_read():
    for mod in (gm_module, lm_module, inspect.getmodule(SimLocalMaster), inspect.getmodule(LiveLocalMaster)):
        src = inspect.getsource(mod)
        assert 'port, "_' not in src and "port._" not in src, f"{mod.__name__} reads a private attribute of a port"


def test_the_simulators_port_has_every_sim_hook():
    hooks = [n for n in vars(SimHooks) if not n.startswith("_")] + list(SimHooks.__annotations__)
    assert set(hooks) >= {"set_timer_at", "count_message", "message_counter", "timer_queue", "route", "routes"}
    for name in hooks:
        assert hasattr(engine.SimPort, name), f"SimPort lacks the SimHooks member {name}"


# --- the hooks' behaviour, driven by hand-written messages --------------------------------------------------------
MASKS = np.array([0b01, 0b11, 0b01, 0b11, 0b01, 0b01, 0b11, 0b01], dtype=np.uint32)


def _layout() -> MeghaLayout:
    return MeghaLayout.build(Datacenter(worker_masks=MASKS), 2, 2)


def _gm(cls=GlobalMaster, **kw):
    g = cls(0, _layout(), TaskRecorder(np.zeros(32)), policy=Policy.FIRST, **kw)
    port = RecordingPort()
    g.attach(port)
    return g, port


def _lm(cls=LocalMaster, lm=0, **kw):
    m = cls(lm, _layout(), TaskRecorder(np.zeros(32)), heartbeat=5.0, **kw)
    port = RecordingPort()
    m.attach(port)
    m.on_start(0.0)
    return m, port


def _job(tasks, j=0):
    t = np.array(tasks, dtype=np.int64)
    return JobArrival(j, t, np.ones(t.size), np.zeros(t.size, dtype=np.uint32), None)


def _launched(port) -> list[int]:
    return [t for _, m in port.take(LaunchRequest) for t in m.tasks]


def test_gm_handle_replaces_a_handler_and_returns_the_previous_one():
    g, port = _gm()
    seen = []
    prev = g.handle(JobArrival, lambda msg, now: (seen.append(msg.job), prev(msg, now)))
    assert prev is not None
    g.on_message(_job([1, 2], j=7), 0.0)
    assert seen == [7] and sorted(_launched(port)) == [1, 2]
    assert g.handle(str, print) is None and g.handle(str, print) is print


def test_gm_admit_sees_every_booking_and_may_drop_a_task():
    class Picky(GlobalMaster):
        def admit(self, e, w):
            self.seen.append((e[0], w))
            return e[0] != 2

    g, port = _gm(Picky)
    g.seen = []
    assert g._book_inline is False and g._lean is False  # the inlined bookings are off under a hook
    g.on_message(_job([1, 2, 3]), 0.0)
    assert [t for t, _ in g.seen] == [1, 2, 3]
    assert sorted(_launched(port)) == [1, 3] and len(g.queue) == 0  # task 2: neither booked nor queued
    plain, _ = _gm()
    assert plain._book_inline and "_book" not in vars(plain)  # no hook: nothing in the way


def test_gm_handing_over_sees_every_handed_task_and_may_drop_one():
    class Picky(GlobalMaster):
        def handing_over(self, e, lm):
            self.seen.append((e[0], lm))
            return e[0] != 12

    g, port = _gm(Picky, handoff_after=1.0)
    g.seen = []
    g.on_message(_job([*range(8), 11, 12, 13]), 0.0)  # 8 workers: tasks 11-13 wait
    port.take()
    g.on_timer("handoff", 2.0)
    handed = [m for _, m in port.take(Handoff)]
    assert sorted(t for t, _ in g.seen) == [11, 12, 13]
    assert sorted(t for m in handed for t in m.tasks) == [11, 13] and len(g.queue) == 0  # 12: neither handed nor queued
    plain, pport = _gm(handoff_after=1.0)
    plain.on_message(_job([*range(8), 11, 12, 13]), 0.0)
    pport.take()
    plain.on_timer("handoff", 2.0)
    assert sorted(t for _, m in pport.take(Handoff) for t in m.tasks) == [11, 12, 13]


def test_gm_hold_launches_sends_one_request_per_lm_at_the_end():
    g, port = _gm()
    with g.hold_launches(0.0):
        g.on_message(_job([1]), 0.0)
        with g.hold_launches(0.0):
            g.on_message(_job([2], j=1), 0.0)
        assert not port.take(LaunchRequest)  # nested: still held
        g.on_message(_job([3], j=2), 0.0)
        assert not port.sent
    reqs = [m for _, m in port.take(LaunchRequest)]
    assert sorted(t for r in reqs for t in r.tasks) == [1, 2, 3]
    assert len(reqs) == len({r.req for r in reqs}) <= 2  # one per LM
    g.on_message(_job([4], j=3), 0.0)  # released: each step sends again
    assert _launched(port) == [4]


def test_gm_requeue_places_again_and_sends_at_once():
    g, port = _gm()
    g.on_message(_job(list(range(8))), 0.0)  # every worker booked
    port.take()
    g.requeue([(50, 1.0, 0, None, 0, 0)], True, 1.0)
    assert not port.take(LaunchRequest) and g.queue.q._len == 1  # no worker free: queued at the head
    g.on_message(TaskDone(0, [0], [0], None, 1), 2.0)  # a worker comes free: the requeued task takes it
    assert _launched(port) == [50]


def test_lm_start_tasks_and_to_workers_default_to_the_worker_pool():
    m, port = _lm()
    m.on_message(LaunchRequest(0, 1, [10], [1], [5.0], [0]), 0.1)
    ((dst, msg),) = port.take(Launch)
    assert dst == m.pool and list(msg.tasks) == [10]

    class Tap(LocalMaster):
        def to_workers(self, msg, now):
            self.out.append((type(msg).__name__, list(msg.tasks), now))

    t, tport = _lm(Tap)
    t.out = []
    t.on_message(LaunchRequest(0, 1, [10], [1], [5.0], [0]), 0.2)
    assert t.out == [("Launch", [10], 0.2)] and not tport.take(Launch)


def test_lm_place_and_remove_task_tell_every_gm():
    m, port = _lm()
    assert m.place_task(1, 42, None, 0, 0, 0.5)
    assert not m.place_task(1, 43, None, 0, 0, 0.5)  # taken
    m.on_timer("heartbeat", 5.0)
    to = {dst: msg for dst, msg in port.take(StateDelta)}
    assert all(1 in list(d.workers) for d in to.values()) and len(to) == 2  # the owner GM hears too
    assert m.remove_task(1, 42, None, 6.0) == (0, 0)
    m.worker_changed(2, 6.0)
    m.on_timer("heartbeat", 10.0)
    for d in (msg for _, msg in port.take(StateDelta)):
        assert sorted(d.workers) == [1, 2]


def test_lm_direct_updates_only_where_asked():
    assert LocalMaster.direct_updates is False and SimLocalMaster.direct_updates is True
    e = engine.Engine()
    lay = _layout()
    plain = e.add(LocalMaster(0, lay, TaskRecorder(np.zeros(4))))
    sim = e.add(SimLocalMaster(1, lay, TaskRecorder(np.zeros(4))))
    assert plain._routes is None and sim._routes is not None and sim._routes is sim.port.routes


def test_live_lm_kills_through_its_to_workers_hook():
    m, port = _lm(LiveLocalMaster)
    m.to_workers(Kill([99], m.address), 0.1)  # a task it does not hold: nothing to send
    assert not port.sent
