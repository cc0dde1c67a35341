"""Prometheus metrics of a live service (``prometheus-client``), read from the component at scrape time.

Every service started with ``--metrics-port P`` (the supervisor gives service k of the deployment the port
``metrics.port + k``; ``services.json`` lists them) serves ``http://metrics.bind:P/metrics``. Every metric has
the labels ``service`` (the component's address, e.g. ``megha/gm0``) and ``role`` (active, standby, deposed).

==========================================  =========  ==========================================================
name                                        type       meaning
==========================================  =========  ==========================================================
``megha_gm_queue_length``                   gauge      tasks waiting in a GM's queue
``megha_gm_unacked_requests``               gauge      launch requests a GM sent that no LM acknowledged yet
``megha_gm_tasks_in_flight``                gauge      tasks a GM holds (queued or placed) until done
``megha_gm_tasks_stuck``                    gauge      tasks held too long (see ``megha live status``)
``megha_placements_total``                  counter    tasks a GM placed (mapped to a worker)
``megha_rejections_received_total``         counter    rejected mappings a GM learned of from LM replies
``megha_inconsistencies_total``             counter    mappings an LM rejected (GM view out of date)
``megha_lm_running_tasks``                  gauge      tasks running in an LM's cluster
``megha_lm_busy_workers``                   gauge      busy workers of an LM's cluster
``megha_lm_relaunch_pending``               gauge      runs lost with a dead worker, waiting to be placed again
``megha_lm_hosts_alive``                    gauge      worker hosts an LM hears
``megha_failovers_total``                   counter    standby takeovers of this LM instance
``megha_host_running_tasks``                gauge      tasks a worker host runs
``megha_host_tasks_finished_total``         counter    tasks a worker host finished
``megha_rejected_messages_total``           counter    malformed or invalid messages a service rejected
``megha_broker_republished_total``          counter    durable messages re-published (no broker acknowledgement)
``megha_placement_latency_seconds``         histogram  GM: job arrival → launch request sent, per task
==========================================  =========  ==========================================================
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from prometheus_client import CollectorRegistry, Histogram
    from prometheus_client.metrics_core import Metric

    from megha.live.runtime import Runtime
    from megha.schedulers.megha.gm import GlobalMaster

log = logging.getLogger("megha.live.metrics")

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Collector:
    """Reads every hosted component's status at scrape time."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        fams: dict[str, object] = {}

        def put(name: str, kind: str, doc: str, labels: tuple[str, str], value: float) -> None:
            f = fams.get(name)
            if f is None:
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                f = fams[name] = cls(name, doc, labels=["service", "role"])
            f.add_metric(list(labels), float(value))

        for h in self.rt.hosted.values():
            info_fn = getattr(h.comp, "status_info", None)
            info = info_fn() if info_fn is not None and h.started else {}
            c = info.get("counters", {})
            lab = (h.address, h.role)
            kind = getattr(h.comp, "kind", "")
            if kind == "gm":
                put("megha_gm_queue_length", "gauge", "tasks waiting in the GM's queue", lab, info.get("queue", 0))
                put("megha_gm_unacked_requests", "gauge", "unacknowledged launch requests", lab, info.get("unacked", 0))
                put("megha_gm_tasks_in_flight", "gauge", "tasks held until done", lab, info.get("in_flight", 0))
                put("megha_gm_tasks_stuck", "gauge", "tasks held too long", lab, info.get("stuck", 0))
                put("megha_placements_total", "counter", "tasks placed", lab, getattr(h.comp, "placed_total", 0))
                put(
                    "megha_rejections_received_total",
                    "counter",
                    "rejected mappings learned",
                    lab,
                    c.get("rejections_received", 0),
                )
            elif kind == "lm":
                put("megha_lm_running_tasks", "gauge", "tasks running in the cluster", lab, info.get("running", 0))
                put("megha_lm_busy_workers", "gauge", "busy workers", lab, info.get("busy_workers", 0))
                put("megha_lm_relaunch_pending", "gauge", "lost runs to place", lab, info.get("relaunch_pending", 0))
                put("megha_lm_hosts_alive", "gauge", "worker hosts heard", lab, info.get("hosts_alive", 0))
                put("megha_inconsistencies_total", "counter", "rejected mappings", lab, c.get("inconsistencies", 0))
                put("megha_failovers_total", "counter", "standby takeovers", lab, h.counters.get("takeovers", 0))
            elif kind == "worker":
                put("megha_host_running_tasks", "gauge", "tasks running", lab, info.get("running", 0))
                put("megha_host_tasks_finished_total", "counter", "tasks finished", lab, c.get("tasks_finished", 0))
            put("megha_rejected_messages_total", "counter", "rejected messages", lab, h.counters["rejected_messages"])
            tc = getattr(self.rt.transport, "counters", {})
            put("megha_broker_republished_total", "counter", "re-published messages", lab, tc.get("republished", 0))
        yield from fams.values()


def placement_histogram(registry: CollectorRegistry) -> Histogram:
    """The GM's placement-latency histogram (job arrival to launch request, per task), registered in ``registry``."""
    from prometheus_client import Histogram

    return Histogram(
        "megha_placement_latency_seconds",
        "GM: job arrival to launch request, per task",
        ["service"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )


def serve_metrics(rt: Runtime, port: int, bind: str = "127.0.0.1") -> CollectorRegistry:
    """Serve the runtime's metrics on ``http://bind:port/metrics``; returns the registry."""
    from prometheus_client import CollectorRegistry, start_http_server

    reg = CollectorRegistry()
    reg.register(_Collector(rt))
    hist = placement_histogram(reg)
    for h in rt.hosted.values():
        comp = h.comp
        if getattr(comp, "kind", "") == "gm" and hasattr(comp, "_have"):
            _watch_placements(comp, hist.labels(h.address).observe)
    try:
        start_http_server(port, addr=bind, registry=reg)
    except OSError as e:
        log.error("metrics endpoint %s:%d not available: %s", bind, port, e)
    return reg


def _watch_placements(gm: GlobalMaster, observe: Callable[[float], object]) -> None:
    """Count the GM's placements and observe each task's wait (arrival at the GM → launch request sent)."""
    from megha.live.runtime import _ids

    rec = gm.rec
    orig = rec.decided
    gm.placed_total = 0

    def decided(ids: np.ndarray, t: float) -> None:
        orig(ids, t)
        now = time.time()
        have = gm._have
        ids = _ids(ids)
        gm.placed_total += len(ids)
        for i in ids:
            a = have.get(i)
            if a is not None:
                observe(now - a)

    rec.decided = decided
