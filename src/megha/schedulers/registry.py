"""Scheduler registry: each scheduler family registers a builder under one or more names.

A family lives in its own sub-package of :mod:`megha.schedulers` and registers itself on import with
:func:`register`; :func:`get` imports every sub-package once, so adding a family never means editing a
shared list. A builder receives a :class:`BuildContext` (engine, recorder, workload, datacenter, options)
and returns a :class:`Deployment` that tells the runner where each job enters the system.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from megha.errors import InputError, did_you_mean
from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.model.workload import Workload
from megha.sim.component import Address
from megha.sim.engine import Engine


class SchedulerOptions(BaseModel):
    """Base of every scheduler's options model (unknown keys are rejected with a clear message)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class BuildContext:
    """Everything a scheduler builder needs to wire its components into an engine."""

    engine: Engine
    recorder: TaskRecorder
    workload: Workload
    datacenter: Datacenter
    feasible: np.ndarray
    options: Any
    rng: np.random.Generator
    n_gms: int | None = None
    n_lms: int | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class Deployment:
    """A wired scheduler: ``route(job)`` gives the address where the job is submitted."""

    route: Callable[[int], Address]
    counters: Callable[[], dict[str, int]] = lambda: {}
    describe: dict = field(default_factory=dict)
    components: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)  # runtime-only results for experiments (not serialized)


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


_REGISTRY: dict[str, SchedulerSpec] = {}
_loaded = False


def register(
    name: str,
    help: str,
    options: type[SchedulerOptions] = SchedulerOptions,
    modes: tuple[str, ...] = ("slot",),
    defaults: dict | None = None,
    in_compare: bool = True,
    profiles: dict[str, str] | None = None,
    unbounded: bool = False,
) -> Callable[[Callable[[BuildContext], Deployment]], Callable[[BuildContext], Deployment]]:
    """Decorator: register ``build`` under ``name``. ``defaults`` preset options (e.g. 1 GM × 1 LM);
    ``profiles`` names the fidelity profiles the options model accepts (``profile=NAME``) with, for each, the
    list of its deviations from the papers' text (shown by ``megha schedulers``). ``unbounded`` marks a bound
    that ignores capacity and placement constraints (it runs every task at once), so the conformance suite does
    not hold it to them."""

    def deco(build: Callable[[BuildContext], Deployment]) -> Callable[[BuildContext], Deployment]:
        family = build.__module__.split(".")[2] if build.__module__.startswith("megha.schedulers.") else name
        _REGISTRY[name] = SchedulerSpec(
            name, help, build, options, family, modes, defaults or {}, in_compare, profiles or {}, unbounded
        )
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


_ORDER = ["megha", "megha-central", "pigeonc", "pigeon", "sparrow", "yarn", "macrm", "flow"]


def names() -> list[str]:
    """Registered scheduler names: Megha first, then its peers, then the rest; ``ideal`` last."""
    _load_all()

    def key(n: str) -> tuple[int, str]:
        if n == "ideal":
            return (len(_ORDER) + 1, n)
        return (_ORDER.index(n) if n in _ORDER else len(_ORDER), n)

    return sorted(_REGISTRY, key=key)


def get(name: str) -> SchedulerSpec:
    """The spec registered under ``name``; unknown names list the known ones."""
    _load_all()
    spec = _REGISTRY.get(name)
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
