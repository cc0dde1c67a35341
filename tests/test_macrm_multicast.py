"""A message to several components as one simulator event (macrm/multicast.py): the same deliveries, in the same
order and at the same instant as one message each, and the same message counts."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from megha.schedulers.macrm.multicast import Multicast, send_all
from megha.sim.component import Component
from megha.sim.engine import Engine


class _Recv(Component):
    kind = "r"

    def __init__(self, address: str, log: list) -> None:
        super().__init__(address)
        self.log = log

    def on_message(self, msg: Any, now: float) -> None:
        self.log.append((now, self.address, msg))
        if msg == "go" and self.address == "r0":
            self.port.send("r2", "echo")  # sent while the fold is being delivered: after every receiver got it


class _Send(Component):
    kind = "s"

    def __init__(self, mc: Multicast | None) -> None:
        super().__init__("s")
        self.mc = mc

    def on_start(self, now: float) -> None:
        self.port.set_timer(1.0, ("x",))

    def on_timer(self, key: Hashable, now: float) -> None:
        self.port.send("r1", "before")
        send_all(self.port, self.mc, ["r0", "r1", "r2"], "go", now)
        self.port.send("r0", "after")


def _run(fold: bool, suspend: bool = False) -> tuple[list, int, dict]:
    eng = Engine(seed=0)
    log: list = []
    for k in range(3):
        eng.add(_Recv(f"r{k}", log))
    eng.add(_Send(Multicast(eng.components) if fold else None))
    if suspend:
        eng.run(until=0.5)
        eng.suspend("r1")
        eng.run(until=2.0)
        eng.resume("r1")
    eng.run()
    return log, eng.events, eng.message_counts()


def test_one_event_delivers_as_separate_messages() -> None:
    sep, n_sep, counts_sep = _run(False)
    fold, n_fold, counts_fold = _run(True)
    assert fold == sep
    assert [m for _, _, m in fold] == ["before", "go", "go", "go", "after", "echo"]
    assert counts_fold == counts_sep
    assert n_fold == n_sep - 2


def test_a_suspended_receiver_holds_its_copy() -> None:
    sep, _, _ = _run(False, suspend=True)
    fold, _, _ = _run(True, suspend=True)
    assert fold == sep
    assert ("r1", "go") in [(a, m) for _, a, m in fold]
