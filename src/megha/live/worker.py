"""A worker host: one process (or in-process service) running many emulated workers' real tasks.

The host serves a set of worker ids (a slice of one or more LM clusters). For a :class:`Launch` it starts each
task on its worker, reports ``started`` to clients, and when the task ends flushes its pending events (``failed``
with the reason when the exit code is not 0) and sends :class:`Finished` to the launching LM. The LM, not the
host, reports ``finished`` to clients when it accepts the completion, so a run that no longer counts (its host was
declared dead and the task runs elsewhere) is never reported, and a host killed right after reporting to its LM
loses no event. How a
task runs is set per run by the client's :class:`~megha.live.messages.RunSpec`:

* ``sleep`` — hold the worker for the task's duration (the host keeps one heap of end times and one event-loop
  timer for the earliest: no timer object per task; tasks that end within ``SLEEP_GRAIN`` of each other end
  together, at the latest one's end, never before their own);
* ``cpu`` — a subprocess that burns one CPU for the task's duration;
* ``command`` — a subprocess running the run's command line (``{task}``, ``{job}``, ``{duration}``,
  ``{worker}`` are substituted; no shell) when the deployment allows its executable
  (``workers.allowed_commands``; otherwise the task fails with "not allowed" and nothing runs), stdout and
  stderr captured to ``output_dir/run<R>/task<T>.log`` when ``output_dir`` is set, and the last lines sent to
  clients as an ``output`` event.

It also sends each LM it serves a :class:`~megha.live.messages.HostBeat` every ``beat`` seconds (worker
liveness) and enforces the allocation invariant (one task per worker in slot mode, demands within capacity in
resource mode) on a :class:`~megha.schedulers.common.ledger.WorkerLedger` over the layout's workers — the
simulator's check and error text — but a live service must not crash: a violation is logged with the ledger's
text and counted as ``overcommits`` (a scheduler bug, never expected), and the task runs all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np

from megha.live.masters import host_address
from megha.live.messages import Control, Events, HostBeat, HostKill, HostLaunch, RunSpec
from megha.live.runtime import CLIENT_SHIFT as _RT_CLIENT_SHIFT
from megha.live.runtime import ForwardingRecorder, adaptive_window, events_by_client
from megha.schedulers.common.ledger import FREE, WorkerLedger
from megha.schedulers.common.messages import Finished, Kill, Killed, Launch
from megha.schedulers.megha.layout import MeghaLayout
from megha.sim.component import Component

log = logging.getLogger("megha.live.worker")

RUN_SHIFT = 36  # task id = run << RUN_SHIFT | index within the run
NONCE_BITS = 16  # run id = client identity << NONCE_BITS | a random nonce
CLIENT_SHIFT = RUN_SHIFT + NONCE_BITS  # client identity of a task id: t >> CLIENT_SHIFT
assert CLIENT_SHIFT == _RT_CLIENT_SHIFT
TASK_KINDS = ("sleep", "cpu", "command")
COMPLETION_WINDOW = 0.005  # s: completions within this window reach their LM as one Finished message (the
# completion path only: placement latency is not affected; at 1,000 tasks/s it saves one broker message per task on
# the host -> LM and LM -> GM hops). The window grows with the completion rate (runtime.adaptive_window) up to
COMPLETION_WINDOW_MAX = 0.02  # s (at >= 4,000 completions per second)

SLEEP_GRAIN = 0.001  # s: sleep tasks ending this close together end in one timer callback (none ends early)

_CPU = "import time,sys\nend=time.perf_counter()+float(sys.argv[1])\nwhile time.perf_counter()<end: pass\n"


class WorkerHost(Component):
    """Runs launched tasks for real on its workers (see the module docs)."""

    kind = "worker"

    def __init__(
        self,
        name: str,
        layout: MeghaLayout,
        workers: list[int],
        epoch: int,
        beat: float = 0.2,
        default_kind: str = "sleep",
        output_dir: str | None = None,
        lease: float = 0.6,
        allowed_commands: list[str] | tuple[str, ...] = (),
    ) -> None:
        super().__init__(host_address(layout, name))
        if default_kind not in TASK_KINDS:
            raise ValueError(f"task kind {default_kind!r} is not one of {TASK_KINDS}")
        self.name = name
        self.layout = layout
        self.epoch = epoch
        self.beat = beat
        self.lease = max(lease, 2 * beat)  # must stay below the LMs' host_timeout
        self._last_beat = 0.0
        self.default_kind = default_kind
        self.allowed = set(allowed_commands)
        self.output_dir = Path(output_dir) if output_dir else None
        self.rec = ForwardingRecorder()
        self.workers = sorted(int(w) for w in workers)
        self.mine = set(self.workers)
        lm_of = layout.lm_of
        self._lm_of: list[int] = lm_of.tolist()
        self.by_lm: dict[int, list[int]] = {}
        for w in self.workers:
            self.by_lm.setdefault(int(lm_of[w]), []).append(w)
        self.capacity = layout.capacity
        #: what each worker runs (slot mode) or holds (resource mode), indexed by global worker id
        self.ledger = WorkerLedger(self.address, len(self._lm_of), layout.capacity)
        self.used = self.ledger.used  # resource mode: the requests of each worker's running tasks (else None)
        self.slot = self.ledger.task  # slot mode: the task each worker runs, FREE if none (else None)
        self.running: dict[int, list] = {}  # task -> [worker, reply_to, demand, handle, start, lm]
        self.specs: dict[int, RunSpec] = {}
        self.counters: Counter = Counter()
        self._out: dict[str, list[list]] = {}  # reply -> [tasks, workers, demands]
        self._flush_armed = False
        self._window = COMPLETION_WINDOW  # the current completion window (adaptive)
        # sleep tasks: heap of (end on the loop's clock, token, task); a task's entry counts while running[t][3] is its
        # token (a killed or relaunched task leaves a stale entry, skipped when it comes due)
        self._ends: list[tuple[float, int, int]] = []
        self._end_timer: asyncio.TimerHandle | None = None
        self._end_at = float("inf")
        self._token = 0
        self.closing = False
        self.flush_events = None  # set by the runtime: its (coalescing) event sender

    # --- component interface -------------------------------------------------------------------------------
    def on_start(self, now: float) -> None:
        self._last_beat = now
        self._beat()
        self.port.set_timer(self.beat, "beat")

    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "beat":
            if now - self._last_beat > self.lease:
                self._fence(now)
            self._last_beat = now
            self._beat()
            self.port.set_timer(self.beat, "beat")

    def _fence(self, now: float) -> None:
        """This host could not renew its lease in time (it stalled): its LMs may have given its tasks to other
        workers, so it stops them all and comes back as a new incarnation (exactly-once completion)."""
        n = len(self.running)
        log.error(
            "%s: heartbeat lease missed by %.2f s: stopping %d task(s), re-registering",
            self.address,
            now - self._last_beat,
            n,
        )
        for r in self.running.values():
            _stop(r[3])
        self.running.clear()
        self.ledger.clear()
        self._out.clear()
        self.epoch += 1
        self.counters["self_fenced"] += 1
        self.counters["tasks_dropped_by_fence"] += n

    def _beat(self) -> None:
        by_lm_running: dict[int, list[int]] = {}
        for t, r in self.running.items():
            by_lm_running.setdefault(r[5], []).append(t)
        for lm, ws in self.by_lm.items():
            self.port.send(
                self.layout.lm_address(lm),
                HostBeat(self.name, self.epoch, lm, ws, by_lm_running.get(lm, []), self.beat),
            )

    def on_message(self, msg: Any, now: float) -> None:
        if isinstance(msg, HostLaunch | HostKill):
            if msg.epoch != self.epoch or msg.host != self.name:  # meant for an earlier incarnation of this host
                self.counters["stale_launches_dropped" if isinstance(msg, HostLaunch) else "stale_kills_dropped"] += 1
                return
            if isinstance(msg, HostLaunch):
                self._launch(Launch(msg.tasks, msg.workers, msg.durations, msg.reply_to, msg.demands), now)
            else:
                self._kill(Kill(msg.tasks, msg.reply_to), now)
        elif isinstance(msg, Launch):
            self._launch(msg, now)
        elif isinstance(msg, Kill):
            self._kill(msg, now)
        elif isinstance(msg, RunSpec):
            if msg.kind not in TASK_KINDS:
                raise ValueError(f"run {msg.run}: unknown task kind {msg.kind!r}")
            self.specs[msg.run] = msg
            self.counters["runs_known"] = len(self.specs)
        elif isinstance(msg, Control):
            pass
        else:
            raise TypeError(f"{self.address}: unexpected message {type(msg).__name__}")

    def validate(self, msg: Any) -> None:
        """Refuse a launch for workers this host does not serve or with bad durations, before it is handled."""
        if isinstance(msg, Launch | HostLaunch):
            ws = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
            if not self.mine.issuperset(ws):
                w = next(w for w in ws if w not in self.mine)
                raise ValueError(f"worker {w} is not hosted by {self.name}")
            for d in msg.durations:
                if not 0 <= d < 1e9:
                    raise ValueError(f"task duration {d} is not valid")

    # --- launching --------------------------------------------------------------------------------------
    def _launch(self, msg: Launch, now: float) -> None:
        tasks = msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist()
        workers = msg.workers if isinstance(msg.workers, list) else msg.workers.tolist()
        durs = msg.durations if isinstance(msg.durations, list) else msg.durations.tolist()
        dem = msg.demands
        started_t, started_w = [], []
        lm_of = self._lm_of
        running = self.running
        reply_to = msg.reply_to
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ends = self._ends
        first_end = self._end_at
        kinds: dict[int, str] = {}  # run -> task kind, for this message
        claim = self.ledger.claim_or_report
        for i, t in enumerate(tasks):
            w = workers[i]
            if t in running:
                self.counters["duplicate_launches"] += 1
                continue
            d = None if dem is None else dem[i]
            over = claim(t, w, now, d)
            if over is not None:
                self.counters["overcommits"] += 1
                log.error("%s", over)
            run = t >> RUN_SHIFT
            kind = kinds.get(run)
            if kind is None:
                kind = kinds[run] = self._spec(t).kind
            if kind == "sleep":  # as _start does, without a call per task
                self._token += 1
                handle = self._token
                end = t0 + float(durs[i])
                heapq.heappush(ends, (end, handle, t))
                if end < first_end:
                    first_end = end
            else:
                handle = self._start(t, w, float(durs[i]))
            running[t] = [w, reply_to, d, handle, now, lm_of[w]]
            started_t.append(t)
            started_w.append(w)
        if first_end < self._end_at:
            self._arm_ends(loop, first_end)
        if started_t:
            self.rec.started(started_t, now, started_w)
            self.counters["tasks_started"] += len(started_t)

    def _spec(self, t: int) -> RunSpec:
        run = t >> RUN_SHIFT
        s = self.specs.get(run)
        return s if s is not None else RunSpec(run, self.default_kind)

    def _start(self, t: int, w: int, dur: float) -> asyncio.Handle | asyncio.Future:
        spec = self._spec(t)
        loop = asyncio.get_running_loop()
        if spec.kind == "sleep":
            self._token += 1
            end = loop.time() + dur
            heapq.heappush(self._ends, (end, self._token, t))
            if end < self._end_at:
                self._arm_ends(loop, end)
            return self._token
        if spec.kind == "cpu":
            argv = [sys.executable, "-c", _CPU, repr(dur)]
        else:
            fields = {
                "task": t & ((1 << RUN_SHIFT) - 1),
                "task_id": t,
                "run": t >> RUN_SHIFT,
                "duration": f"{dur:.6g}",
                "worker": w,
            }
            try:
                argv = [a.format(**fields) for a in shlex.split(spec.command)]
            except (KeyError, ValueError, IndexError) as e:
                return loop.call_soon(self._complete, t, 126, f"bad command template: {e}")
            if not argv:
                return loop.call_soon(self._complete, t, 126, "empty command")
            if not self.command_allowed(argv[0]):
                self.counters["commands_refused"] += 1
                return loop.call_soon(
                    self._complete, t, 126, f"command {argv[0]!r} not allowed (workers.allowed_commands)"
                )
        return asyncio.ensure_future(self._run_proc(t, argv, spec.cwd or None))

    def _arm_ends(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._end_timer is not None:
            self._end_timer.cancel()
        self._end_at = at
        self._end_timer = loop.call_at(at, self._ends_due)

    def _ends_due(self) -> None:
        """Complete every sleep task whose end has come (one callback for all of them)."""
        self._end_timer = None
        self._end_at = float("inf")
        ends = self._ends
        loop = asyncio.get_running_loop()
        now = loop.time()
        running = self.running
        done = []
        while ends and ends[0][0] <= now:
            _, tok, t = heapq.heappop(ends)
            r = running.get(t)
            if r is not None and r[3] == tok:
                done.append(t)
        if done:
            self._complete_many(done)
        if ends:
            self._arm_ends(loop, max(ends[0][0], now + SLEEP_GRAIN))

    def command_allowed(self, exe: str) -> bool:
        """An executable is allowed when the deployment lists its name (as given) or its absolute path."""
        if exe in self.allowed:
            return True
        if os.path.isabs(exe):
            return False
        path = shutil.which(exe)
        return path is not None and path in self.allowed

    async def _run_proc(self, t: int, argv: list[str], cwd: str | None) -> None:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
            )
        except OSError as e:
            self._complete(t, 127, f"cannot start {argv[0]!r}: {e.strerror or e}")
            return
        try:
            out, _ = await proc.communicate()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        text = out.decode(errors="replace")
        if self.output_dir is not None:
            d = self.output_dir / f"run{t >> RUN_SHIFT}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"task{t & ((1 << RUN_SHIFT) - 1)}.log").write_text(text)
        if text and self._spec(t).kind == "command":
            self.rec.output(t, time.time(), text)
        code = proc.returncode
        self._complete(t, code, "" if code == 0 else f"exit code {code}")

    # --- completion ----------------------------------------------------------------------------------------
    def _release(self, t: int) -> list | None:
        r = self.running.pop(t, None)
        if r is None:
            return None
        w, d = r[0], r[2]
        if self.used is None:
            if self.slot[w] == t:  # ledger.release([w], tasks=[t]), inlined
                self.slot[w] = FREE
        else:
            self.used[w] -= d
        return r

    def _complete_many(self, ts: list[int]) -> None:
        """Sleep tasks ``ts`` ended (exit code 0): as :meth:`_complete` for each."""
        if self.closing:
            return
        n = 0
        out = self._out
        running, slot = self.running, self.slot
        slot_mode = self.used is None
        for t in ts:
            r = running.pop(t, None)
            if r is None:
                continue
            if slot_mode:  # as _release does
                if slot[r[0]] == t:
                    slot[r[0]] = FREE
            else:
                self.used[r[0]] -= r[2]
            n += 1
            o = out.get(r[1])
            if o is None:
                o = out[r[1]] = [[], [], []]
            o[0].append(t)
            o[1].append(r[0])
            o[2].append(r[2])
        self.counters["tasks_finished"] += n
        if n and not self._flush_armed:
            self._arm_flush()

    def _complete(self, t: int, code: int, note: str) -> None:
        r = self._release(t)
        if r is None or self.closing:
            return
        now = time.time()
        # no "finished" event here: the LM reports it when it accepts the completion (it alone knows whether
        # this run still counts — a host declared dead may finish a task that already runs elsewhere)
        if code != 0:
            self.rec.failed([t], now, [int(code)], note)
            self.counters["tasks_failed"] += 1
        self.counters["tasks_finished"] += 1
        o = self._out.get(r[1])
        if o is None:
            o = self._out[r[1]] = [[], [], []]
        o[0].append(t)
        o[1].append(r[0])
        o[2].append(r[2])
        if not self._flush_armed:
            self._arm_flush()

    def _arm_flush(self) -> None:
        self._flush_armed = True
        asyncio.get_running_loop().call_later(self._window, self._flush, self._window)

    def _flush(self, window: float = 0.0) -> None:
        self._flush_armed = False
        out, self._out = self._out, {}
        if window > 0:  # the next window follows this one's rate of completions
            n = sum(len(o[0]) for o in out.values())
            self._window = adaptive_window(COMPLETION_WINDOW, COMPLETION_WINDOW_MAX, n / window)
        if self.rec.items:  # events first: a task's "started" reaches clients before its LM learns it finished
            if self.flush_events is not None:
                # only when an event still waiting is about a task whose completion leaves now (it started within
                # the event window, or it failed or printed): the other events leave with the window, and a host
                # at 1,000 tasks/s sends one event message per window instead of one per completion message too
                self.flush_events(force=bool(out) and self._events_about(out))
            else:
                for dst, items in events_by_client(self.rec.take()):
                    self.port.send(dst, Events(self.address, items))
        for reply, (ts, ws, ds) in out.items():
            self.port.send(reply, Finished(ts, ws, None if ds[0] is None else np.array(ds)))

    def _events_about(self, out: dict[str, list[list]]) -> bool:
        """Whether an event waiting to be sent is about one of the tasks whose completions ``out`` holds (or is not a
        ``started`` event)."""
        done: set[int] | None = None
        for kind, _t, ids, _aux, _note in self.rec.items:
            if kind != "started":
                return True
            if done is None:
                done = {t for ts, _, _ in out.values() for t in ts}
            if not done.isdisjoint(ids):
                return True
        return False

    def _kill(self, msg: Kill, now: float) -> None:
        ts, ws, ds = [], [], []
        for t in msg.tasks if isinstance(msg.tasks, list) else msg.tasks.tolist():
            r = self._release(t)
            if r is None:
                continue
            _stop(r[3])
            ts.append(t)
            ws.append(r[0])
            ds.append(r[2])
        self.counters["tasks_killed"] += len(ts)
        self.port.send(msg.reply_to, Killed(ts, ws, None if not ds or ds[0] is None else np.array(ds)))

    def shutdown(self) -> None:
        """Stop every running task (the process is going away)."""
        self.closing = True
        for r in self.running.values():
            _stop(r[3])
        self.running.clear()
        if self._end_timer is not None:
            self._end_timer.cancel()
            self._end_timer = None
        self._ends.clear()

    def status_info(self) -> dict:
        """The host's figures for status reports: workers, running tasks, latest runs, counters."""
        return {
            "workers": len(self.workers),
            "running": len(self.running),
            "runs": sorted(self.specs)[-20:],
            "counters": {k: int(v) for k, v in self.counters.items()},
        }


def _stop(h: asyncio.Handle | asyncio.Future | int) -> None:
    """Stop a task's run: a subprocess's future or a handle is cancelled; a sleep task's heap entry (an int token) goes
    stale once the task is no longer in ``running``."""
    if not isinstance(h, int):
        h.cancel()
