"""A simulator-only YARN-like RM that runs the node managers in-process (slot mode).

With :class:`~megha.schedulers.centralized.nodemanager.NodeManagers` as a separate component, every container
costs a ``Launch`` message (RM → node managers, one network delay), a timer at its node's first heartbeat tick
after it ends and a ``NodeHeartbeat`` message back — three engine events. :class:`SimResourceManager` keeps
exactly that timing but handles the node managers' side in-process: the start the node managers would have
recorded is recorded when the RM commits a launch, and the heartbeat reaches the RM through one absolute-time
timer at the instant the ``NodeHeartbeat`` message would have arrived (containers reported at the same tick share
it). The node managers' checks (one container per node) and counters are kept, and the message counts report the
``Launch`` and ``NodeHeartbeat`` messages modelled; the communication delay of a launch is recorded as the engine
would.

Only the order of events that fall at exactly the same simulated instant may differ from the multi-component form
(a heartbeat is ordered by when its container was launched, not by when the node managers' timer fired), so
results are the same unless two unrelated events coincide to the last bit. The deployment uses it in slot mode
when the engine has no processing model (per-message costs need real messages).
"""

from __future__ import annotations

from megha.errors import SimulationError
from megha.schedulers.centralized.messages import NodeHeartbeat
from megha.schedulers.centralized.rm import ResourceManager
from megha.schedulers.common.messages import Launch


class SimResourceManager(ResourceManager):
    """:class:`ResourceManager` with its node managers in-process (simulator only, slot mode; needs
    ``port.set_timer_at``)."""

    def __init__(self, *args, launch_delay: float = 0.0005, **kw) -> None:
        """``launch_delay``: RM → node managers (the heartbeat's latency back is ``heartbeat_latency``)."""
        super().__init__(*args, **kw)
        if self.resource:
            raise ValueError(f"{self.address}: in-process node managers are for slot mode only")
        self.launch_delay = float(launch_delay)
        self.on_node: list[int] = [-1] * len(self.mask_of)  # the node managers' own record
        self._due: dict[float, list] = {}  # tick -> [the node managers' timer instant, (task, node, end)...]
        self.nm_heartbeats = 0

    def on_timer(self, key, now: float) -> None:
        if key[0] != "nm":
            super().on_timer(key, now)
            return
        g = self._due.pop(key[1])
        items = g[1:]
        on_node = self.on_node
        rec = self.rec
        if len(items) == 1:  # one container on one node (the common case): ResourceManager._heartbeat inlined
            t, w, e = items[0]
            on_node[w] = -1
            ts = [t]
            rec.finished(ts, e)
            self.nm_heartbeats += 1
            self.port.count_message(NodeHeartbeat)
            self.stats["heartbeats"] += 1
            rec.completion_known(ts, now)
            self.busy[w] = False
            if self.queue_policy == "fair":
                self.running_by_user[self.user_of.pop(t)] -= 1
            if self.claims:
                self._launch_claims(w)
            self._fill(w)
            self._flush(now)
            return
        else:
            items.sort(key=lambda x: x[2])
            for _, w, _ in items:
                on_node[w] = -1
            tasks = [x[0] for x in items]
            t_nodes = [x[1] for x in items]
            ends = [x[2] for x in items]
            lo = 0
            for i in range(1, len(items) + 1):  # record ends at their true times
                if i == len(items) or ends[i] != ends[lo]:
                    rec.finished(tasks[lo:i], ends[lo])
                    lo = i
            uniq = sorted(set(t_nodes))
            self.nm_heartbeats += len(uniq)
            msg = NodeHeartbeat(uniq, tasks, t_nodes, None)
        self.port.count_message(NodeHeartbeat)
        self._heartbeat(msg, now)
        self._flush(now)

    def _flush(self, now: float) -> None:
        lt, lw, ld, _ = self._launch
        if not lt:
            return
        self._launch = ([], [], [], [])
        rec = self.rec
        port = self.port
        rec.decided(lt, now)
        d = self.launch_delay
        rec.add_comm(lt, d)
        port.count_message(Launch)
        t1 = now + d  # when the node managers get the launch
        on_node = self.on_node
        for t, w in zip(lt, lw, strict=True):
            if on_node[w] >= 0:
                raise SimulationError(
                    f"{self.address}: node {w} over-committed at t={t1:.6f}: task {t} "
                    f"launched while it runs task {on_node[w]}"
                )
            on_node[w] = t
        rec.started(lt, t1, lw)
        due = self._due
        next_tick = self.schedule.next_tick
        back = self.hb_latency
        at = port.set_timer_at
        for t, w, dur in zip(lt, lw, ld, strict=True):
            e = t1 + dur
            tick = next_tick(w, e)
            g = due.get(tick)
            if g is None:
                fire = t1 + (tick - t1)  # the instant the node managers' timer would fire
                due[tick] = [fire, (t, w, e)]
                at(fire + back, ("nm", tick))  # the instant their heartbeat would reach the RM
            else:
                g.append((t, w, e))

    def running(self) -> int:
        """Containers running on the nodes."""
        return sum(1 for t in self.on_node if t >= 0)
