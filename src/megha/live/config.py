"""Deployment configuration of the live runtime (a TOML or JSON file; see ``examples/live/``).

Every service of a deployment reads the same file, so they agree on the datacenter (workers and their
constraints, generated from ``datacenter.seed`` exactly as the simulator does), the Megha layout (GMs, LMs,
partitions), Megha's settings (``[megha]``: the simulator's ``MeghaOptions``, see :class:`LiveMeghaOptions`) and
the subjects they talk on (``name`` is the subject namespace, so deployments can share a broker).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from megha.errors import InputError, did_you_mean
from megha.schedulers.megha import PAPER, MeghaOptions


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BrokerConfig(_Strict):
    """Where the message broker is, and whether ``megha live up`` starts one."""

    kind: Literal["nats", "inproc"] = Field("nats", description="nats (processes) or inproc (one process)")
    url: str = Field("", description="NATS URL; default nats://<bind>:<port>")
    user: str = Field("", description="NATS user (with password) when joining a broker set up by hand")
    password: str = Field("", description="NATS password (prefer the generated credentials: auth = true)")
    token: str = Field("", description="NATS auth token (instead of user/password)")
    auth: bool = Field(
        True,
        description="megha live up generates per-role credentials into state_dir/auth (mode 0600) and starts "
        "nats-server with them and with per-role subject permissions",
    )
    tls_cert: str = Field("", description="server certificate (PEM) for nats-server: clients must use TLS")
    tls_key: str = Field("", description="private key (PEM) of tls_cert")
    tls_ca: str = Field("", description="CA certificate (PEM) clients verify the broker with (enables TLS)")
    clients: int = Field(
        4,
        ge=1,
        le=255,
        description="client identities megha live up generates (auth/client.json is client 0, auth/client-<k>.json "
        "client k); each reads the task events of its own runs only",
    )
    start_server: bool = Field(True, description="megha live up starts nats-server when it is installed")
    server_bin: str = Field("nats-server", description="nats-server executable")
    bind: str = Field("127.0.0.1", description="address the started nats-server listens on (loopback by default)")
    port: int = Field(4222, ge=1, le=65535)
    threads: int = Field(
        0,
        ge=0,
        le=1024,
        description="GOMAXPROCS of the nats-server megha live up starts (threads running its Go code at once); 0: 1 "
        "on a machine with at most 2 CPUs (where it shares them with the services: its threads then wake each other "
        "less and it spends less CPU per message), else Go's default (one per CPU)",
    )

    def gomaxprocs(self) -> int | None:
        """The GOMAXPROCS to start nats-server with (``None``: Go's default)."""
        if self.threads:
            return self.threads
        return 1 if (os.cpu_count() or 1) <= 2 else None

    def resolved_url(self) -> str:
        """The broker's URL: ``url`` if set, else ``nats://`` (``tls://`` with TLS) at ``bind:port``."""
        scheme = "tls" if self.tls_ca or self.tls_cert else "nats"
        return self.url or f"{scheme}://{self.bind}:{self.port}"


class DatacenterConfig(_Strict):
    workers: int | None = Field(200, ge=1, description="generate this many workers (as megha simulate -w)")
    cluster: str | None = Field(None, description="or a cluster file / sample:NAME")
    seed: int = Field(0, description="seed of the generated workers' constraints (and of task constraints)")
    constraints: bool = Field(True, description="placement constraints on workers and tasks")
    resources: bool = Field(False, description="resource mode (CPU/memory per worker and task)")
    capacity: dict[str, float] = Field(default_factory=lambda: {"cpu": 64.0, "mem": 16.0})
    demand: dict[str, float] = Field(default_factory=lambda: {"cpu": 1.0, "mem": 0.25})


# MeghaOptions settings the live runtime does not run (simulator behaviour, or not built live yet): each must keep
# its paper value; MeghaOptions' other settings mean in a deployment what they mean in a simulation
_LIVE_PAPER_ONLY = (
    "queue",
    "route",
    "partition_order",
    "matching",
    "reject",
    "full_pull",
    "heartbeat_phase",
    "trace_quirks",
)
_LIVE_UNSET_ONLY: tuple[str, ...] = ()
# MeghaOptions settings that only shape a simulation (accepted, no effect live): how the simulator runs the workers,
# the megha20 profile's state pull (it needs matching=scan, refused above); every other setting reaches the live
# masters through megha.schedulers.megha.wiring
SIMULATOR_ONLY = ("in_process_workers", "pull_overwrites")
#: fairness shares (Algorithm 2): ``shares`` and ``user_gms`` reach the live masters through
#: :func:`~megha.schedulers.megha.wiring.megha_parts` (the simulator's), ``users`` gives the client's jobs their user
#: queue through :func:`~megha.schedulers.megha.wiring.job_users` (the simulator's)
FAIRNESS = ("shares", "user_gms", "users")
#: the settings whose default differs live, each explained in :class:`LiveMeghaOptions`
LIVE_DEFAULTS = ("heartbeat", "gms", "lms")


class LiveMeghaOptions(MeghaOptions):
    """``[megha]``: Megha's scheduling settings — the simulator's :class:`~megha.schedulers.megha.MeghaOptions`
    (the same names, validation, defaults and descriptions; ``megha schedulers`` lists them), with these live
    overrides:

    * ``heartbeat`` defaults to 1 s, not 5 s: a real deployment's GMs get fresher views for the price of a
      small message per LM per second (``megha live submit --compare`` simulates with the same value);
    * ``gms`` and ``lms`` are the deployment's topology (default 2 GMs x 4 LMs), not overrides of ``--gms`` and
      ``--lms``;
    * the live runtime runs the ``paper`` profile: the reference simulators' behaviours (``profile``,
      ``queue``, ``route``, ``partition_order``, ``matching``, ``reject``, ``full_pull``, ``heartbeat_phase``,
      ``trace_quirks``) are refused with a clear error if set to anything else; ``in_process_workers`` and
      ``pull_overwrites`` concern the simulator only;
    * fairness shares (``shares``, ``user_gms``, ``preemption``, ``preempt_candidates``) run live as in the
      simulator (Algorithm 2: one queue per user at the GM ``user_gms`` names, preemption verified by the LMs);
      the client gives each job its user queue as ``users`` says (``random`` draws from ``datacenter.seed``) and
      sends it to that queue's GM;
    * the starvation remedy (``handoff_after``, ``handoff_rare``) runs live as in the simulator (slot mode, without
      fairness shares): a GM hands long-waiting tasks to an LM, which starts them on its next suitable free workers
      and counts them among the tasks it holds (a restarted GM does not place them again).

    Every other setting has the simulator's default and reaches the live GMs and LMs through the function the
    simulator's builder uses (:func:`megha.schedulers.megha.wiring.megha_parts`: the fairness shares, the GMs' and
    LMs' settings ``gm_settings``/``lm_settings``; the layout from ``megha_layout``), so it means the same in both;
    ``tests/test_live_config.py`` checks that every option of ``MeghaOptions`` is one of these kinds
    (docs/extending.md).
    """

    gms: int = Field(2, ge=1, description="number of GMs of the deployment (live: default 2)")
    lms: int = Field(4, ge=1, description="number of LMs of the deployment (live: default 4)")
    heartbeat: float = Field(
        1.0,
        gt=0,
        description="LM update period in seconds (live override: default 1 s for fresher GM views; the "
        "simulator's default is 5 s as IoT 2023)",
    )

    @model_validator(mode="after")
    def _live_supported(self) -> LiveMeghaOptions:
        bad = [] if self.profile == "paper" else [f"profile={self.profile!r}"]
        bad += [f"{k}={getattr(self, k)!r}" for k in _LIVE_PAPER_ONLY if getattr(self, k) != PAPER.get(k)]
        bad += [f"{k}={getattr(self, k)!r}" for k in _LIVE_UNSET_ONLY if getattr(self, k) is not None]
        if bad:
            raise ValueError(
                f"{', '.join(bad)}: not supported by the live runtime (it runs the paper profile; these settings "
                "are for `megha simulate`)"
            )
        if self.handoff_after is not None and self.shares is not None:
            raise ValueError("handoff_after needs slot mode, no fairness shares, queue=fifo and matching=offer")
        if self.shares is not None:
            n = len(self.shares)
            if any(s < 0 for s in self.shares) or sum(self.shares) > 1 + 1e-9:
                raise ValueError("fairness shares must be >= 0 and sum to at most 1")
            gms = self.user_gms
            if gms is not None and (len(gms) != n or not all(0 <= g < self.gms for g in gms)):
                raise ValueError(f"user_gms must give a GM in 0..{self.gms - 1} for each of the {n} users")
        elif self.user_gms is not None:
            raise ValueError("user_gms needs fairness shares (shares)")
        return self

    def sim_options(self) -> dict[str, Any]:
        """The same settings as ``megha simulate`` options (``-o``) of the ``megha`` scheduler."""
        return self.model_dump(mode="json", exclude={"gms", "lms"})


class WorkersConfig(_Strict):
    hosts: int = Field(2, ge=1, description="worker host processes (which workers each serves: layout)")
    layout: Literal["striped", "by-lm"] = Field(
        "striped",
        description="striped: each host serves a slice of every LM's cluster; by-lm: host h serves part of LM "
        "h mod lms's cluster only (needs hosts >= lms; what `live chaos --faults` uses, so a partition fault is "
        "the hosts of one LM)",
    )
    beat: float = Field(0.2, gt=0, description="host heartbeat period (s)")
    task_kind: Literal["sleep", "cpu", "command"] = Field("sleep", description="default way to run a task")
    output_dir: str = Field("", description="capture command output here (one file per task)")
    allowed_commands: list[str] = Field(
        default_factory=list,
        description="executables `command` tasks may run (names or absolute paths); empty: command tasks are "
        "refused (each fails with 'not allowed')",
    )


class HAConfig(_Strict):
    lm_standby: bool = Field(True, description="run a standby next to each LM")
    failover_timeout: float = Field(1.0, gt=0, description="standby takes over after this much silence (s)")
    host_timeout: float = Field(1.0, gt=0, description="a worker host silent this long is dead (s)")
    restart: bool = Field(True, description="the supervisor restarts dead GMs, worker hosts and the broker")
    new_standby: bool = Field(True, description="the supervisor starts a new standby LM whenever an LM process ends")
    compact_every: int = Field(
        5000,
        ge=0,
        description="an active LM writes a snapshot of its state into its replication log every this many records "
        "and purges the records before it (a standby started later begins at the snapshot); 0 keeps the whole log",
    )


class MetricsConfig(_Strict):
    port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Prometheus metrics: service k of the deployment (in `megha live status` order) serves "
        "http://bind:port+k/metrics; 0 turns them off",
    )
    bind: str = Field("127.0.0.1", description="address the metrics endpoints listen on")


class LiveConfig(_Strict):
    """A whole live deployment."""

    name: str = Field("megha", description="subject namespace of this deployment")
    broker: BrokerConfig = Field(default_factory=BrokerConfig)
    datacenter: DatacenterConfig = Field(default_factory=DatacenterConfig)
    megha: LiveMeghaOptions = Field(default_factory=LiveMeghaOptions)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    ha: HAConfig = Field(default_factory=HAConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    state_dir: str = Field(".megha-live", description="pids and logs of `megha live up`")

    @model_validator(mode="after")
    def _handoff_in_slot_mode(self) -> LiveConfig:
        if self.megha.handoff_after is not None and self.datacenter.resources:
            raise ValueError("megha.handoff_after needs slot mode (datacenter.resources = false)")
        return self


def load_config(path: str | Path | None) -> LiveConfig:
    """Read a deployment file (TOML or JSON); ``None`` gives the defaults."""
    if path is None:
        return LiveConfig()
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"{p}: {e.strerror}") from e
    try:
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{p}: {e}") from e
    try:
        return LiveConfig(**data)
    except ValidationError as e:
        msgs = "; ".join(_describe(err) for err in e.errors())
        raise InputError(f"{p}: invalid live configuration: {msgs}") from e


def _describe(err: Any) -> str:
    """One validation error: where, what, and for an unknown key the closest known one."""
    where = ".".join(str(x) for x in err["loc"])
    if err["type"] != "extra_forbidden":
        return f"{where}: {err['msg']}"
    model: Any = LiveConfig
    for part in err["loc"][:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        model = field.annotation if field is not None else None
    return f"{where}: unknown setting{did_you_mean(err['loc'][-1], getattr(model, 'model_fields', ()))}"
