"""Scheduler registry: each scheduler family registers a builder under one or more names.

A family lives in its own sub-package of :mod:`megha.schedulers` and registers itself on import with
:func:`register`; :func:`names` imports every sub-package once, so adding a family never means editing a
shared list (:func:`get` imports just the family of a built-in name when it can). A builder receives a
:class:`BuildContext` (the simulator host it adds components to, recorder, workload, datacenter, options)
and returns a :class:`Deployment` that tells the runner where each job enters the system. A family declares the
counters its deployment reports (a :class:`~megha.metrics.counters.CounterSet`: namespace and meanings) when it
registers.

**Plug-ins.** An installed package adds schedulers through the entry-point group ``megha.schedulers``: each entry
point names a module (or an object in one) whose import calls :func:`register`. They are loaded after the
built-in families, so they appear in ``megha schedulers`` and run wherever a scheduler name is accepted
(``megha simulate``, ``compare``, sweeps on local processes or Ray, the Python API). A plug-in cannot replace a
built-in name; one that fails to load is reported (a warning, and in ``megha schedulers``) and skipped.
``examples/plugin/`` is a complete plug-in package.

**The extension contract in one import.** Besides its own names, this module re-exports what a builder and its
components are written against: :class:`~megha.sim.component.Component` and its :class:`~megha.sim.component.Port`
(with the simulator-only :class:`~megha.sim.component.SimHooks`), the :class:`~megha.sim.component.Host` that fault
models get, the :class:`~megha.metrics.recorder.Recorder` protocol components report to, and
:class:`~megha.metrics.counters.CounterSet` (``__all__`` lists them).
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from megha.errors import InputError, did_you_mean
from megha.metrics.counters import RUN_COUNTERS, CounterSet
from megha.metrics.recorder import Recorder, TaskRecorder
from megha.model.topology import Datacenter
from megha.model.workload import Workload
from megha.sim.component import Address, Component, Host, Port, SimHooks
from megha.sim.seeding import named_stream

if TYPE_CHECKING:
    from megha.sim.engine import DelayModel, ProcessingModel


__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_ERRORS",
    "Address",
    "BuildContext",
    "Component",
    "CounterSet",
    "Deployment",
    "Host",
    "Port",
    "Recorder",
    "SchedulerOptions",
    "SchedulerSpec",
    "SimHooks",
    "find",
    "get",
    "names",
    "parse_options",
    "register",
]


class SchedulerOptions(BaseModel):
    """Base of every scheduler's options model (unknown keys are rejected with a clear message)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class BuildContext:
    """Everything a scheduler builder needs to wire its components into a simulation.

    A builder adds its components with :meth:`add`, reads one-way delays with :meth:`delay` (or the whole
    :attr:`delay_model`), whether components have processing costs with :attr:`processing` and whether a fault
    schedule applies with :attr:`faults`, and draws any build-time randomness from :attr:`rng` (or from a stream of
    its own, :meth:`stream`, so one purpose's draws never shift another's). Its fault models get
    :attr:`host` (the :class:`~megha.sim.component.Host` protocol: suspend, resume, replace, inject …), never the
    engine itself.
    """

    host: Host
    recorder: TaskRecorder  # the simulator's; components should need only the Recorder protocol
    workload: Workload
    datacenter: Datacenter
    feasible: np.ndarray
    options: Any
    rng: np.random.Generator
    n_gms: int | None = None
    n_lms: int | None = None
    extra: dict = field(default_factory=dict)
    #: a fault schedule will be applied to the run (components may crash): fast paths that assume none stay off
    faults: bool = False
    #: the run's seed (what :meth:`stream` derives its streams from); None when the context was made by hand
    seed: int | None = None

    def add(self, comp: Component) -> Component:
        """Add a component to the simulation (it gets its port and its named random stream); returns it."""
        return self.host.add(comp)

    def stream(self, name: str) -> np.random.Generator:
        """A build-time random stream of its own, named ``name``, from the run's seed
        (:func:`megha.sim.seeding.named_stream`): drawing from it changes no other stream, unlike :attr:`rng`,
        which every build-time purpose of the builder shares."""
        if self.seed is None:
            raise ValueError("BuildContext.stream needs the run's seed (BuildContext(seed=...))")
        return named_stream(self.seed, "build", name)

    def delay(self, src_kind: str, dst_kind: str) -> float:
        """The one-way delay of a message from a component of kind ``src_kind`` to one of kind ``dst_kind``."""
        return self.host.delay_model.delay(src_kind, dst_kind)

    @property
    def delay_model(self) -> DelayModel:
        """The run's :class:`~megha.sim.engine.DelayModel` (network delay, per-link delays)."""
        return self.host.delay_model

    @property
    def processing(self) -> ProcessingModel | None:
        """The processing-cost model, or None when components run in zero time (fast paths may rely on it)."""
        return self.host.processing

    @property
    def engine(self) -> Host:
        """Deprecated name of :attr:`host` (plug-ins written against earlier versions)."""
        return self.host


@dataclass
class Deployment:
    """A wired scheduler: ``route(job)`` gives the address where the job is submitted."""

    route: Callable[[int], Address]
    # the family's counters at the end of a run, by flat key (declared with register(counters=...))
    counters: Callable[[], dict[str, int]] = lambda: {}
    describe: dict = field(default_factory=dict)
    components: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)  # runtime-only results for experiments (not serialized)
    # worker, partition and other family-specific faults (megha.model.faults.FaultHandler); crashes of the
    # components listed above are handled by the runner for every family
    faults: Any = None
    # a compiled run of the whole simulation for configurations that allow it: ``run(engine, source, stall_timeout)``
    # runs it, reports to the recorder and engine as the components would, and returns True; False (before touching
    # anything) lets the runner run the components instead. Never used with faults, actions or instrumentation
    run: Callable[..., bool] | None = None


@dataclass
class SchedulerSpec:
    name: str
    help: str
    build: Callable[[BuildContext], Deployment]
    options: type[SchedulerOptions]
    family: str
    modes: tuple[str, ...] = ("slot",)
    defaults: dict = field(default_factory=dict)
    in_compare: bool = True
    # named fidelity profiles (``-o profile=NAME``): NAME -> how that profile deviates from the papers' text
    profiles: dict[str, str] = field(default_factory=dict)
    # True for a bound that ignores capacity and constraints (``ideal``): exempt from those conformance checks
    unbounded: bool = False
    # the distribution (or entry point) that brought a plug-in scheduler; None for a built-in one
    plugin: str | None = None
    # the counters the family's Deployment.counters() reports, under its namespace (megha.metrics.counters)
    counters: CounterSet | None = None

    def counter_sets(self) -> tuple[CounterSet, ...]:
        """The run-level counters, then this scheduler's (its family's namespace; empty when it declares none)."""
        return (RUN_COUNTERS, self.counters or CounterSet(self.family))


#: the entry-point group through which installed packages add schedulers
ENTRY_POINT_GROUP = "megha.schedulers"

_REGISTRY: dict[str, SchedulerSpec] = {}
_loaded = False
#: plug-ins that failed to load: entry point name -> error
PLUGIN_ERRORS: dict[str, str] = {}


def register(
    name: str,
    help: str,
    options: type[SchedulerOptions] = SchedulerOptions,
    modes: tuple[str, ...] = ("slot",),
    defaults: dict | None = None,
    in_compare: bool = True,
    profiles: dict[str, str] | None = None,
    unbounded: bool = False,
    counters: CounterSet | None = None,
) -> Callable[[Callable[[BuildContext], Deployment]], Callable[[BuildContext], Deployment]]:
    """Decorator: register ``build`` under ``name``. ``defaults`` preset options (e.g. 1 GM × 1 LM);
    ``profiles`` names the fidelity profiles the options model accepts (``profile=NAME``) with, for each, the
    list of its deviations from the papers' text (shown by ``megha schedulers``). ``unbounded`` marks a bound
    that ignores capacity and placement constraints (it runs every task at once), so the conformance suite does
    not hold it to them. ``counters`` declares what the builder's ``Deployment.counters()`` reports: the family's
    namespace and each counter's meaning (:class:`~megha.metrics.counters.CounterSet`; listed by
    ``megha schedulers NAME``, grouped by namespace in ``summary.json``)."""

    def deco(build: Callable[[BuildContext], Deployment]) -> Callable[[BuildContext], Deployment]:
        family = build.__module__.split(".")[2] if build.__module__.startswith("megha.schedulers.") else name
        old = _REGISTRY.get(name)
        if old is not None and old.build.__module__ != build.__module__:
            raise ValueError(f"scheduler name {name!r} is already registered by {old.build.__module__}")
        _REGISTRY[name] = spec = SchedulerSpec(
            name, help, build, options, family, modes, defaults or {}, in_compare, profiles or {}, unbounded
        )
        spec.counters = counters
        return build

    return deco


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    import megha.schedulers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.ispkg and mod.name != "common":
            importlib.import_module(f"megha.schedulers.{mod.name}")
    _loaded = True
    _load_plugins()


def _load_plugins() -> None:
    """Import the modules named by the ``megha.schedulers`` entry points of installed packages."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        before = set(_REGISTRY)
        try:
            ep.load()
        except Exception as e:  # a broken plug-in must not break the built-in schedulers
            PLUGIN_ERRORS[ep.name] = f"{type(e).__name__}: {e}"
            warnings.warn(f"scheduler plug-in {ep.name!r} ({ep.value}) failed to load: {e}", stacklevel=2)
            continue
        dist = getattr(ep, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else ep.value
        for n in set(_REGISTRY) - before:
            _REGISTRY[n].plugin = origin


_ORDER = ["megha", "megha-central", "pigeonc", "pigeon", "sparrow", "yarn", "macrm", "flow"]


def names() -> list[str]:
    """Registered scheduler names: Megha first, then its peers, then the rest; ``ideal`` last."""
    _load_all()

    def key(n: str) -> tuple[int, str]:
        if n == "ideal":
            return (len(_ORDER) + 1, n)
        return (_ORDER.index(n) if n in _ORDER else len(_ORDER), n)

    return sorted(_REGISTRY, key=key)


#: Where the built-in names live, so that running one scheduler imports one family (each family imports numba
#: kernels and solvers; importing all of them costs about half a CPU-second). Only a shortcut: a name missing here
#: (a new family, a plug-in) is found by importing everything, and a test checks each entry registers its name.
_HOME = {
    "megha": "megha",
    "megha-central": "megha",
    "pigeonc": "pigeon",
    "pigeon": "pigeon",
    "sparrow": "sparrow",
    "yarn": "centralized",
    "macrm": "macrm",
    "flow": "flow",
    "oracle": "oracle",
    "ideal": "ideal",
    **{n: "packing" for n in ("bf-j", "bf-js", "bf-s", "fifo-ff", "vqs", "vqs-bf")},
}


def find(name: str) -> SchedulerSpec | None:
    """The spec registered under ``name``, or None; imports only the family that registers a built-in name."""
    spec = _REGISTRY.get(name)
    if spec is None and not _loaded:
        home = _HOME.get(name)
        if home is not None:
            importlib.import_module(f"megha.schedulers.{home}")
            spec = _REGISTRY.get(name)
        if spec is None:
            _load_all()
            spec = _REGISTRY.get(name)
    return spec


def get(name: str) -> SchedulerSpec:
    """The spec registered under ``name``; unknown names list the known ones."""
    spec = find(name)
    if spec is None:
        raise InputError(f"unknown scheduler {name!r}{did_you_mean(name, _REGISTRY)}; known: {', '.join(names())}")
    return spec


def parse_options(spec: SchedulerSpec, raw: dict[str, Any]) -> SchedulerOptions:
    """Validate scheduler options (defaults of the spec first, then the user's)."""
    merged = {**spec.defaults, **raw}
    try:
        return spec.options(**merged)
    except ValidationError as e:
        fields = spec.options.model_fields
        msgs = "; ".join(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
            + (did_you_mean(err["loc"][0], fields) if err["type"] == "extra_forbidden" and err["loc"] else "")
            for err in e.errors()
        )
        known = ", ".join(fields)
        raise InputError(f"scheduler {spec.name!r}: bad option(s): {msgs} (options: {known or 'none'})") from None
