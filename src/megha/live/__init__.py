"""Megha's live runtime: the simulator's GM and LM state machines as real services over a message broker.

Layout of the package (each module has one job):

* :mod:`.wire` — versioned, schema-checked msgpack envelopes (never pickle);
* :mod:`.transport` — the in-process bus and NATS (why NATS: see its docs, DESIGN §7 figures);
* :mod:`.runtime` — drives sans-I/O components in real time: ports, timers, exactly-once delivery,
  active/standby replication;
* :mod:`.masters` — :class:`~.masters.LiveGlobalMaster` / :class:`~.masters.LiveLocalMaster`: the simulator's
  GM and LM plus view rebuild on (re)start, worker liveness and relaunch;
* :mod:`.worker` — a worker host running many emulated workers' real tasks (sleep, CPU, command lines);
* :mod:`.deploy` — starting services; :class:`~.deploy.LocalDeployment` for one-process deployments;
* :mod:`.client` — submitting traces or jobs and turning task events into the simulator's metrics;
* :mod:`.supervisor` — ``megha live up``/``down``: processes, nats-server, restarts;
* :mod:`.cli` — the ``megha live`` commands.
"""
