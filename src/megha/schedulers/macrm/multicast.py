"""One simulator event for one message sent to several components at once (simulator only).

The arbitrator tells every tracker whether to forward heartbeats (:class:`~.messages.Forwarding`) and a finished job
manager tells every node-manager group to forget its job (:class:`~.messages.Forget`): the same message to each
address of a list, sent at the same instant with the same delay. Sent one by one, those messages arrive one after
the other at the same instant with consecutive sequence numbers, so nothing can run between them; :func:`send_all`
queues them as one event that hands the message to each receiver in the same order — the same deliveries, one
event instead of one per receiver. The receivers are looked up when the event runs (a restarted or crashed
component gets it as it would have got its own message). Without the simulator's direct route (a live port, a
per-link delay, a processing model) the messages are sent one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from megha.sim.component import Component, Port


class Multicast:
    """The handler of a folded delivery: ``(addresses, message)`` to each address's current component, in order."""

    __slots__ = ("components",)

    def __init__(self, components: Mapping[str, Component]) -> None:
        self.components = components

    def __call__(self, payload: tuple[list[str], Any], now: float) -> None:
        addresses, msg = payload
        comps = self.components
        for a in addresses:
            comps[a].on_message(msg, now)


def send_all(port: Port, mc: Multicast | None, addresses: list[str], msg: Any, now: float) -> None:
    """Send ``msg`` to every address in ``addresses`` (in order): one event through ``mc`` when every receiver takes
    the simulator's default-delay route, else one message each."""
    route = getattr(port, "route", None)
    if mc is not None and route is not None and len(addresses) > 1:
        cls = type(msg)
        first = route(addresses[0], "on_message", cls)
        if first and all(route(a, "on_message", cls) for a in addresses[1:]):
            append, _, d, seq, cell, comm = first
            if comm is None:
                append((now + d, seq(), mc, (addresses, msg)))
                cell[0] += len(addresses)
                return
    for a in addresses:
        port.send(a, msg)
