"""Build and start the services of a deployment: GMs, LMs (active/standby), worker hosts.

``start_gm``/``start_lm``/``start_host`` start one service on a transport inside the running event loop (a
process runs one of them: ``megha live gm|lm|worker``); :class:`LocalDeployment` starts a whole deployment in
one loop — over the in-process bus (tests, ``megha live run``) or over NATS — and can kill and restart its
services for fault tests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from megha.live.config import LiveConfig
from megha.live.masters import LiveGlobalMaster, LiveLocalMaster
from megha.live.runtime import HOSTS, Runtime
from megha.live.transport import InProcBroker, NatsTransport, Transport
from megha.live.worker import WorkerHost
from megha.model import topology
from megha.model.topology import Datacenter
from megha.runner.inputs import STREAM_DATACENTER, engine_seed, stream
from megha.samples import resolve
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.wiring import MeghaParts, megha_layout, megha_parts

if TYPE_CHECKING:
    from megha.sim.component import Component

log = logging.getLogger("megha.live.deploy")


def datacenter_of(cfg: LiveConfig) -> Datacenter:
    """The deployment's workers, built exactly as ``megha simulate`` builds them from the same settings."""
    d = cfg.datacenter
    if d.cluster is not None:
        dc = topology.load_cluster(resolve(d.cluster, "cluster"))
    else:
        dc = topology.generate(d.workers, stream(d.seed, STREAM_DATACENTER), constrained=d.constraints)
    if d.resources:
        dc = dc.with_resources(d.capacity)
    return dc


def components_seed(cfg: LiveConfig) -> int:
    """The seed the deployment's components are hosted with: the one ``megha simulate`` gives its engine for the
    same run seed (``datacenter.seed``). Each component draws from the stream named by this seed and its address
    (:func:`megha.sim.seeding.named_stream`), so a live GM or LM draws what the simulated one of its address draws,
    and adding a component changes no other component's draws."""
    return engine_seed(cfg.datacenter.seed)


def layout_of(cfg: LiveConfig, dc: Datacenter | None = None) -> MeghaLayout:
    """The deployment's LM clusters and GM partitions, cut as the simulator cuts them from the same options."""
    return megha_layout(dc if dc is not None else datacenter_of(cfg), cfg.megha)


def parts_of(cfg: LiveConfig, layout: MeghaLayout | None = None) -> MeghaParts:
    """What the deployment's GMs and LMs are built from (settings, fairness shares), by the simulator's function."""
    return megha_parts(cfg.megha, layout if layout is not None else layout_of(cfg))


def host_workers(layout: MeghaLayout, n_hosts: int, h: int, mode: str = "striped") -> list[int]:
    """Workers of host ``h`` of ``n_hosts``.

    ``striped`` (the default): the h-th slice of every LM's cluster (a host death leaves every LM with workers to
    relaunch on). ``by-lm``: host ``h`` serves LM ``h mod L`` only (a slice of its cluster when there are more hosts
    than LMs), so a host stands for part of one LM's group: replayed fault schedules map ``partition`` faults (an
    LM's whole group of workers) onto the hosts of that LM."""
    if mode == "by-lm":
        L = layout.n_lms
        if n_hosts < L:
            raise ValueError(f"workers.layout 'by-lm' needs at least one host per LM ({L}), not {n_hosts}")
        lm = h % L
        mine = list(range(lm, n_hosts, L))
        ws = np.arange(int(layout.lm_lo[lm]), int(layout.lm_hi[lm]))
        return np.array_split(ws, len(mine))[mine.index(h)].tolist()
    out: list[int] = []
    for lm in range(layout.n_lms):
        ws = np.arange(int(layout.lm_lo[lm]), int(layout.lm_hi[lm]))
        out.extend(np.array_split(ws, n_hosts)[h].tolist())
    return out


def hosts_of_workers(layout: MeghaLayout, n_hosts: int, workers: Iterable[int], mode: str = "striped") -> list[int]:
    """The hosts (indices) that serve any of ``workers``."""
    want = set(int(x) for x in workers)
    return [h for h in range(n_hosts) if want.intersection(host_workers(layout, n_hosts, h, mode))]


def make_transport(
    cfg: LiveConfig,
    who: str,
    broker: InProcBroker | None = None,
    give_up_after: float | None = 60.0,
    role: str = "service",
    client: int = 0,
) -> Transport:
    """A connection for ``who`` with the credentials of ``role`` (``service``, ``client`` or ``supervisor``): the
    configured user/password or token when set, else the ones ``megha live up`` generated in the state dir
    (a client: those of client identity ``client``)."""
    if cfg.broker.kind == "inproc":
        if broker is None:
            raise ValueError("the in-process transport needs a broker shared by the services of one process")
        return broker.transport()
    from megha.live.security import client_tls, read_credentials

    b = cfg.broker
    user, password, token = b.user, b.password, b.token
    name = role if role != "client" or not client else f"client-{int(client)}"
    loader = None if (user or token) else (lambda: read_credentials(cfg, name))
    return NatsTransport(
        b.resolved_url(),
        user,
        password,
        token,
        client_name=f"{cfg.name}-{who}",
        give_up_after=give_up_after,
        ns=cfg.name,
        tls=client_tls(cfg),
        credentials=loader,
        clients=b.clients,
        private=role == "client",
    )


_warmed = False


def warm_up(cfg: LiveConfig | None = None) -> None:
    """Compile (or load from numba's cache) the JIT kernels of the GM's and the LM's hot paths before a service
    goes live; once per process.

    With ``cfg``, a few tasks go through a tiny deployment on the in-process bus with ``cfg``'s scheduling
    settings (policy, constraints, resource mode), in a thread of its own, so every kernel those settings reach
    is ready. In a fresh checkout (CI) the first placement otherwise compiled its kernels mid-run: the process
    stood still for 4 s under load, worker hosts' leases expired and runs were cut short."""
    global _warmed
    if _warmed:
        return
    _warmed = True
    from megha.model.matching import WaitQueue

    q = WaitQueue()
    q.push_back((0, 1.0, 0, None, 0), 0)
    q.pop_first_fitting_inv(0)
    if cfg is None:
        return
    import threading

    d, m = cfg.datacenter, cfg.megha
    mini = LiveConfig(
        name="warm-up",
        broker={"kind": "inproc"},
        datacenter={
            "workers": 24,
            "seed": d.seed,
            "constraints": d.constraints,
            "resources": d.resources,
            "capacity": d.capacity,
            "demand": d.demand,
        },
        megha=m.model_dump() | {"gms": 1, "lms": 2},
        workers={"hosts": 1},
        ha={"lm_standby": False},
        state_dir=cfg.state_dir,
    )
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(_warm_up_run(mini), 120))
        except BaseException as e:  # a warm-up that fails only costs the compilation later
            failed.append(e)

    t = threading.Thread(target=run, name="megha-warm-up", daemon=True)
    t.start()
    t.join()
    if failed:
        log.warning("warm-up run failed (%s: %s); kernels compile on first use", type(failed[0]).__name__, failed[0])


async def _warm_up_run(cfg: LiveConfig) -> None:
    from megha.live.client import LiveClient, synthetic_workload, with_constraints

    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    dep = await LocalDeployment(cfg, layout=layout).start()
    cl = LiveClient(cfg, dep.transport("client"), layout)
    try:
        await cl.start()
        # more tasks than workers, all at once: tasks wait at the GM, so freed workers are offered to the queue
        # (the fairness scan's kernel) besides the placement search
        await cl.run(with_constraints(cfg, synthetic_workload(8, 8, 0.02, 0.02, seed=1)), dc, stall_timeout=20)
    finally:
        await cl.close()
        await dep.close()


def quiet_gc() -> None:
    """Move everything allocated so far (modules, numba, the layout) out of the garbage collector's reach.

    A full collection over a heap with numba and numpy loaded pauses a process for 0.2–0.3 s here — longer than
    a worker host's heartbeat lease allows; services call this once they are built."""
    import gc

    gc.collect()
    gc.freeze()


def _req_base() -> int:
    # above any earlier incarnation of this GM: milliseconds since the epoch, times 2^20 requests
    return int(time.time() * 1000) << 20


async def start_gm(cfg: LiveConfig, g: int, transport: Transport, layout: MeghaLayout | None = None) -> Runtime:
    """Start GM ``g`` of the deployment on ``transport`` (built as the simulator builds it, from ``cfg.megha``)."""
    layout = layout or layout_of(cfg)
    if not 0 <= g < layout.n_gms:
        raise ValueError(f"GM index {g} outside 0..{layout.n_gms - 1}")
    warm_up(cfg)
    await transport.start()
    await transport.ensure_streams()
    rt = Runtime(transport, cfg.name, f"gm{g}", "gm")
    from megha.live.runtime import ForwardingRecorder

    gm = parts_of(cfg, layout).gm(g, ForwardingRecorder(), cls=LiveGlobalMaster, req_base=_req_base())
    await rt.host(gm, seed=components_seed(cfg), hold_timers_offline=True)
    await rt.start()
    return rt


async def start_lm(
    cfg: LiveConfig, lm: int, transport: Transport, role: str = "solo", layout: MeghaLayout | None = None
) -> Runtime:
    """Start LM ``lm`` of the deployment on ``transport`` as ``role`` (solo, active or standby)."""
    layout = layout or layout_of(cfg)
    if not 0 <= lm < layout.n_lms:
        raise ValueError(f"LM index {lm} outside 0..{layout.n_lms - 1}")
    if role not in ("solo", "active", "standby"):
        raise ValueError(f"LM role must be solo, active or standby, not {role!r}")
    warm_up(cfg)
    await transport.start()
    await transport.ensure_streams()
    rt = Runtime(transport, cfg.name, f"lm{lm}-{role}", "lm")
    from megha.live.runtime import ForwardingRecorder

    comp = parts_of(cfg, layout).lm(lm, ForwardingRecorder(), cls=LiveLocalMaster, host_timeout=cfg.ha.host_timeout)
    await rt.host(
        comp,
        seed=components_seed(cfg),  # active and standbys alike: they replay the same inputs with the same draws
        role=role,
        failover_timeout=cfg.ha.failover_timeout,
        hold_timers_offline=True,
        compact_every=cfg.ha.compact_every,
    )
    await rt.start()
    return rt


async def start_host(
    cfg: LiveConfig, h: int, transport: Transport, layout: MeghaLayout | None = None, name: str | None = None
) -> Runtime:
    """Start worker host ``h`` of the deployment on ``transport`` (``name``: its host name, default ``h<h>``)."""
    layout = layout or layout_of(cfg)
    n = cfg.workers.hosts
    if not 0 <= h < n:
        raise ValueError(f"worker host index {h} outside 0..{n - 1}")
    await transport.start()
    await transport.ensure_streams()
    rt = Runtime(transport, cfg.name, f"host{h}", "worker")
    w = cfg.workers
    comp = WorkerHost(
        name or f"h{h}",
        layout,
        host_workers(layout, n, h, w.layout),
        rt.epoch,
        beat=w.beat,
        default_kind=w.task_kind,
        output_dir=w.output_dir or None,
        lease=0.8 * cfg.ha.host_timeout,
        allowed_commands=w.allowed_commands,
    )
    hosted = await rt.host(comp, seed=components_seed(cfg), extra_subjects=(HOSTS,))
    comp.flush_events = hosted.flush_events
    await rt.start()
    return rt


@dataclass
class LocalDeployment:
    """A whole deployment in this event loop (in-process bus or NATS), with fault injection."""

    cfg: LiveConfig
    broker: InProcBroker | None = None
    layout: MeghaLayout | None = None
    gms: dict[int, Runtime] = field(default_factory=dict)
    lms: dict[tuple[int, str], Runtime] = field(default_factory=dict)
    hosts: dict[int, Runtime] = field(default_factory=dict)

    def transport(self, who: str) -> Transport:
        """A new transport for the service ``who`` (over the deployment's in-process bus or its broker)."""
        return make_transport(self.cfg, who, self.broker)

    async def start(self) -> LocalDeployment:
        """Start the deployment: fresh streams on NATS, then the LMs (standbys first), the GMs and the worker hosts."""
        if self.cfg.broker.kind == "inproc" and self.broker is None:
            self.broker = InProcBroker()
        elif self.cfg.broker.kind == "nats":  # a new deployment: empty streams
            tr = self.transport("setup")
            await tr.start()
            await tr.ensure_streams(reset=True)
            await tr.close()
        self.layout = self.layout or layout_of(self.cfg)
        roles = ("standby", "active") if self.cfg.ha.lm_standby else ("solo",)
        for role in roles:  # standbys first: they must see the active's first input
            for lm in range(self.layout.n_lms):
                self.lms[(lm, role)] = await start_lm(self.cfg, lm, self.transport(f"lm{lm}-{role}"), role, self.layout)
        for g in range(self.layout.n_gms):
            self.gms[g] = await start_gm(self.cfg, g, self.transport(f"gm{g}"), self.layout)
        for h in range(self.cfg.workers.hosts):
            self.hosts[h] = await start_host(self.cfg, h, self.transport(f"host{h}"), self.layout)
        quiet_gc()
        return self

    def component(self, rt: Runtime) -> Component:
        """The component a runtime hosts (its first)."""
        return next(iter(rt.hosted.values())).comp

    async def kill_host(self, h: int) -> None:
        """A worker host dies: its tasks stop, it sends nothing more."""
        rt = self.hosts.pop(h)
        self.component(rt).shutdown()
        await rt.close()

    async def restart_host(self, h: int) -> None:
        """Start worker host ``h`` again (after :meth:`kill_host`)."""
        self.hosts[h] = await start_host(self.cfg, h, self.transport(f"host{h}"), self.layout)

    async def kill_gm(self, g: int) -> None:
        """GM ``g`` dies: its runtime closes."""
        rt = self.gms.pop(g)
        await rt.close()

    async def restart_gm(self, g: int) -> None:
        """Start GM ``g`` again (stateless: it rebuilds its view from the LMs)."""
        self.gms[g] = await start_gm(self.cfg, g, self.transport(f"gm{g}"), self.layout)

    async def kill_lm(self, lm: int, role: str = "active") -> None:
        """The ``role`` instance of LM ``lm`` dies: its runtime closes."""
        rt = self.lms.pop((lm, role))
        await rt.close()

    async def start_standby(self, lm: int) -> str:
        """Start one more standby of LM ``lm`` (as the supervisor does after a failover); returns its key."""
        k = 2
        while (lm, f"standby{k}") in self.lms:
            k += 1
        name = f"standby{k}"
        self.lms[(lm, name)] = await start_lm(self.cfg, lm, self.transport(f"lm{lm}-{name}"), "standby", self.layout)
        return name

    def lm_role(self, lm: int, key: str) -> str:
        """Current role of the LM instance started as ``key`` (active, standby, deposed)."""
        rt = self.lms[(lm, key)]
        return next(iter(rt.hosted.values())).role

    async def close(self) -> None:
        """Stop every service: worker hosts, GMs and LMs."""
        for rt in [*self.hosts.values(), *self.gms.values(), *self.lms.values()]:
            try:
                comp = self.component(rt)
                if hasattr(comp, "shutdown"):
                    comp.shutdown()
                await rt.close()
            except Exception:
                log.exception("closing a service failed")
        self.hosts.clear()
        self.gms.clear()
        self.lms.clear()
        await asyncio.sleep(0)
