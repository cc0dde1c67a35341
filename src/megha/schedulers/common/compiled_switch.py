"""Whether a run takes a family's compiled event loop: one environment switch and one compile-cost rule.

A family whose common configuration can run in one compiled call (Megha's, Sparrow's and Pigeon's loops; the rest of
their runners' scaffolding is :mod:`megha.schedulers.common.compiled_loop`) keeps one :class:`CompiledSwitch` naming
its environment variable and its compiled entry point. The loop costs tens of CPU
seconds to compile the first time (numba then caches it next to its module), so a run with the variable unset uses
it only when it is compiled already — in this process or in numba's cache for this source tree — or when the run
has at least ``cold_min_tasks`` tasks, enough to earn the compile back. The variable set to ``"1"`` always uses it,
``"0"`` never (the family then does not even build the compiled run). The results are the same either way.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass

#: without a compiled loop at hand, runs with fewer tasks than this use the components (not worth the compile)
COLD_MIN_TASKS = 100_000

#: the switch's settings: always, never; anything else (unset) decides by :meth:`CompiledSwitch.use`
ALWAYS = "1"
NEVER = "0"


def kernel_ready(module: str, entry: str) -> bool:
    """Whether the numba dispatcher ``module.entry`` needs no compiling: it has a compiled signature in this process,
    or numba's cache for this source holds an index of compiled ones. Reads numba internals: when in doubt (a
    missing module or attribute, no cache), it is not ready."""
    try:
        d = getattr(importlib.import_module(module), entry)
        return bool(d.signatures) or bool(d._cache._cache_file._load_index())
    except Exception:
        return False


@dataclass(frozen=True)
class CompiledSwitch:
    """The environment switch ``env`` of the compiled loop ``module.entry`` (imported only when asked whether it is
    ready, so that the command line starts fast)."""

    env: str
    module: str
    entry: str = "run_lean"
    cold_min_tasks: int = COLD_MIN_TASKS

    def mode(self) -> str:
        """The switch's setting now: :data:`ALWAYS`, :data:`NEVER`, or ``""`` and anything else for automatic."""
        return os.environ.get(self.env, "")

    def ready(self) -> bool:
        """Whether the compiled loop needs no compiling (:func:`kernel_ready`)."""
        return kernel_ready(self.module, self.entry)

    def use(self, mode: str, n_tasks: int, ready: Callable[[], bool] | None = None) -> bool:
        """Whether a run of ``n_tasks`` (feasible) tasks takes the compiled loop under setting ``mode`` (read by
        :meth:`mode` when the run was built; :data:`NEVER` is the caller's to honour before building it): always
        with :data:`ALWAYS`; otherwise when the run has at least :attr:`cold_min_tasks` tasks or the loop is
        compiled (``ready``, default :meth:`ready`; asked only when the other two tests fail)."""
        if mode == ALWAYS or n_tasks >= self.cold_min_tasks:
            return True
        return (ready or self.ready)()
