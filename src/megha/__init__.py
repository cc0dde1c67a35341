"""Megha: federated datacenter task scheduling — the Megha scheduler and its peers on one simulator.

The Python API (:mod:`megha.api`) is loaded on first use, so ``import megha`` stays cheap::

    import megha
    r = megha.simulate(scheduler="megha", trace="sample:YH_small", workers=1000, seed=1)
    r.jobs.head()                       # pandas DataFrames: .jobs, .tasks, .utilization; .summary is a dict
    megha.compare(["megha", "sparrow"], trace="sample:YH_small", workers=1000)
    megha.sweep("examples/sweeps/tiny.toml")
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = ("simulate", "compare", "sweep", "schedulers", "Result")
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:  # the top layer, imported on first use only (megha.metrics imports __version__ from here)
        import importlib

        return getattr(importlib.import_module("megha.api"), name)
    raise AttributeError(f"module 'megha' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
