"""Parameter sweeps: many simulations from one file, on local cores or a Ray cluster, with one table and report.

``megha sweep FILE.toml`` expands a grid and/or list of runs (:mod:`megha.sweep.spec`), runs what is not finished
yet (:mod:`megha.sweep.runner`) on a process pool or on Ray (:mod:`megha.sweep.engines`), then writes the results
table (:mod:`megha.sweep.aggregate`) and a static HTML report (:mod:`megha.sweep.report`).

``megha.sweep(spec, ...)`` is also the Python API's sweep (:func:`megha.api.sweep`, a DataFrame of the runs): once
this package is imported it is the attribute ``megha.sweep``, so the package itself is callable.
"""

import sys
import types

from megha.sweep.runner import SweepResult, run_sweep
from megha.sweep.spec import RunPlan, SweepSpec, load, parse

__all__ = ["RunPlan", "SweepResult", "SweepSpec", "load", "parse", "run_sweep"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        """``megha.sweep(spec, out=None, *, workers=None, address=None, resume=False, force=False, ...)``:
        :func:`megha.api.sweep`."""
        import importlib

        return importlib.import_module("megha.api").sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
