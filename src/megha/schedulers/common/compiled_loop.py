"""What every compiled event loop's runner does around its loop: the dispatch hook, the gate, the hand-over.

A family whose common configuration can run as one compiled call (Megha's ``_lean.py``, Sparrow's, Pigeon's) keeps
two modules beside its components:

* ``_lean_kernel.py``: the loop itself, one ``@njit(cache=True)`` function ``run_lean`` that takes the trace, the
  deployment's parameters and its generators' state as arrays, and returns ``(status, log sizes, *logs)`` — the
  recorder's five logs first (decided, comm, started, finished, known; see :func:`absorb_logs`), then any of the
  family's own (Megha's loop instead fills log arrays its runner allocates and returns a status, with
  ``NEED_ROOM`` when one is full: arrays a compiled loop may replace cost an atomic reference count at every join of
  its branches). It makes the same decisions, random draws and events in the same order as the components, so the
  per-task columns (and the fingerprint), the event count, the end time, the message counts and the counters are
  the same. What it cannot reproduce (a stall the watchdog would report, a run that runs out of events) makes it
  stop with a status other than OK before the caller touches anything; an over-commit stops it with the worker, the
  task and the instant, and the caller raises the ledger's error (:mod:`megha.schedulers.common._ledger_kernels`).
* ``_lean.py``: the runner. Its ``lean_runner(ctx, <components>, …)``, called by the builder once the components
  are built (they are still built: their counters are reported; they are not run), returns None when the
  configuration is not the one the loop models — :func:`plain_configuration` and the family's own checks — and
  otherwise :func:`dispatch_hook`, the ``Deployment.run`` hook the runner calls before running the engine. Its
  ``_run`` checks what it can only see on the engine (:func:`fresh_engine`, the links' delays, the generators'
  types), converts the workload into arrays (:func:`feasible_job_spans`; each generator copied, so the components
  keep theirs: :func:`uniform_blocks`), calls the loop, and on OK hands its results back: :func:`absorb_logs` to
  the recorder, :func:`count_messages` to the source's port, the family's counters to its components,
  :func:`settle_engine` to the engine and the source.

A new family adds the same two modules, one :class:`~megha.schedulers.common.compiled_switch.CompiledSwitch`
(``<FAMILY>_LEAN``: the loop costs tens of CPU seconds to compile once, numba then caches it next to its module; by
default a run takes it when it is compiled already or has at least ``COLD_MIN_TASKS`` tasks, ``=1`` always, ``=0``
never), and a test module that runs configurations both ways and compares them (``tests/leanutil.py``). A compiled
function the loop calls from another module is compiled into it, and numba's cache of the loop does not notice a
change there: after changing one, touch the loop's module.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from megha.metrics.recorder import TaskRecorder
from megha.model.topology import Datacenter
from megha.schedulers.common.compiled_switch import CompiledSwitch

#: how many of a loop's logs the recorder takes (:func:`absorb_logs`): decided, comm, started, finished, known
N_RECORDER_LOGS = 5
#: the arrays of those logs: (ids, times), (ids, delays), (ids, times, workers), (ids, times), (ids, times)
_LOG_WIDTHS = (2, 2, 3, 2, 2)


class LoopContext(Protocol):
    """What a compiled loop reads of the builder's context (the registry's ``BuildContext`` has it; this layer may
    not import the registry)."""

    datacenter: Datacenter
    faults: bool
    host: Any
    recorder: Any
    feasible: np.ndarray


#: a runner's compiled run: ``run(engine, source, stall_timeout)``, True when it completed the run
RunHook = Callable[[Any, Any, float], bool]


def plain_configuration(ctx: LoopContext) -> bool:
    """Whether the run is in the configuration every compiled loop needs: slot mode (no worker capacities), no
    fault schedule, no processing model, the simulator's own recorder."""
    return (
        ctx.datacenter.capacity is None
        and not ctx.faults
        and getattr(ctx.host, "processing", True) is None
        and type(ctx.recorder) is TaskRecorder
    )


def dispatch_hook(
    switch: CompiledSwitch,
    mode: str,
    ctx: LoopContext,
    run: RunHook,
    extras: dict,
    allowed: Callable[[], bool] | None = None,
) -> RunHook:
    """The ``Deployment.run`` hook of a compiled loop: when the run starts, unless ``allowed()`` says no (a state the
    components must handle, asked first), take the loop if ``switch`` allows it under ``mode`` (read when the run
    was built, :data:`~megha.schedulers.common.compiled_switch.NEVER` honoured by the caller) for the run's
    feasible tasks, run ``run(engine, source, stall_timeout)`` and set ``extras["compiled_run"]`` to what it
    returned (True when it completed the run; False when it gave up, nothing recorded)."""

    def hook(engine: Any, source: Any, stall_timeout: float) -> bool:
        """The runner's hook: the compiled run if the switch allows it (True when it completed the run)."""
        if allowed is not None and not allowed():
            return False
        if not switch.use(mode, int(ctx.feasible.sum())):
            return False
        done = run(engine, source, stall_timeout)
        extras["compiled_run"] = done
        return done

    return hook


def fresh_engine(engine: Any) -> bool:
    """Whether ``engine`` runs components in zero time (no processing model) and has not started: a compiled loop
    runs the whole simulation from time 0."""
    return getattr(engine, "processing", True) is None and not engine._started


def feasible_job_spans(workload: Any, feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each job's feasible tasks are among the feasible tasks in trace order (``np.flatnonzero(feasible)``):
    job ``j``'s are ``[f_off[j], f_off[j] + f_n[j])``; returns ``(f_off, f_n)`` (``int64``)."""
    cum = np.zeros(feasible.size + 1, dtype=np.int64)
    np.cumsum(feasible, out=cum[1:])
    first = np.asarray(workload.job_first_task, dtype=np.int64)
    f_off = cum[first]
    f_n = cum[first + np.asarray(workload.job_num_tasks, dtype=np.int64)] - f_off
    return f_off, f_n


def uniform_blocks(rngs: Sequence[np.random.Generator], blocks: int, block: int) -> np.ndarray:
    """The first ``blocks * block`` uniform numbers of each generator (one row each), drawn from copies (the
    components keep theirs) ``block`` at a time, as :class:`~megha.model.matching.FastRandom` draws them."""
    out = np.empty((len(rngs), blocks * block))
    for i, r in enumerate(rngs):
        rng = copy.deepcopy(r)
        for b in range(blocks):
            out[i, b * block : (b + 1) * block] = rng.random(block)
    return out


def absorb_logs(recorder: TaskRecorder, sizes: np.ndarray, logs: Sequence[np.ndarray]) -> tuple[list[int], list]:
    """Hand a loop's recorder logs to ``recorder.absorb``, in the order the components report them: ``logs`` starts
    with the decided (ids, times), comm (ids, delays), started (ids, times, workers), finished (ids, times) and
    known (ids, times) arrays, each filled up to its entry of ``sizes``. Returns the sizes and arrays of the
    loop's further logs (the family's own), untouched."""
    n = sizes.tolist()
    parts = []
    at = 0
    for k, width in enumerate(_LOG_WIDTHS):
        parts.append(tuple(a[: n[k]] for a in logs[at : at + width]))
        at += width
    recorder.absorb(*parts)
    return n[N_RECORDER_LOGS:], list(logs[at:])


def count_messages(port: Any, counts: Iterable[tuple[type, int, bool]]) -> None:
    """Add the messages a loop modelled to ``port``'s counters: ``(class, n, always)`` each, counted when ``n`` or
    ``always`` (the components count some classes from their start, so that they appear even with none)."""
    for cls, n, always in counts:
        if n or always:
            port.message_counter(cls)[0] += n


def settle_engine(engine: Any, source: Any, now: float, events: int, pos: int, skipped: int) -> None:
    """Leave the engine and the trace source as the components' run would: the clock at ``now`` (the last event's
    time), ``events`` more events, the source at position ``pos`` of its order, ``skipped`` more jobs without a
    feasible task."""
    engine.now = now
    engine.events += events
    source.pos = pos
    source.skipped_jobs += skipped
