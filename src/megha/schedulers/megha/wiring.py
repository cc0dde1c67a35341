"""Megha's GMs, LMs and partitioning from :class:`~megha.schedulers.megha.MeghaOptions`: the one construction
that the simulator's builder (:func:`megha.schedulers.megha.build_megha`) and the live runtime
(:mod:`megha.live.deploy`) both use.

:func:`megha_parts` turns the options and a layout into :class:`MeghaParts`: the checked combination of settings,
the fairness shares (:class:`~.fairness.FairShare`, Algorithm 2) and the GM of each user queue, the GMs' and LMs'
settings; ``parts.gm(...)``/``parts.lm(...)`` make a master from them. :func:`job_users` gives jobs their user
queue (the simulator's builder and the live client draw them the same way). So a setting reaches a GM or an LM
the same way in a simulation and in a real deployment; the caller adds only what it alone knows (the simulator:
the users drawn for the trace's jobs, in-process workers, heartbeat phase, the state-pull delay; the live
runtime: its subclasses of the masters and their service settings) through ``cls`` and the extra keywords.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from megha.errors import InputError
from megha.metrics.recorder import Recorder
from megha.model.topology import Datacenter
from megha.schedulers.megha.fairness import FairShare
from megha.schedulers.megha.gm import GlobalMaster
from megha.schedulers.megha.layout import MeghaLayout
from megha.schedulers.megha.lm import LocalMaster

if TYPE_CHECKING:
    from megha.schedulers.megha import MeghaOptions

G = TypeVar("G", bound=GlobalMaster)
L = TypeVar("L", bound=LocalMaster)


def megha_layout(
    dc: Datacenter,
    opts: MeghaOptions,
    n_lms: int | None = None,
    n_gms: int | None = None,
    *,
    central: bool = False,
) -> MeghaLayout:
    """The datacenter cut into LM clusters and GM partitions.

    ``opts.lms``/``opts.gms`` win over ``n_lms``/``n_gms`` (the run's ``--lms``/``--gms``); ``central`` is the
    papers' centralized configuration (1 GM x 1 LM, addresses under ``megha-central``)."""
    if central:
        return MeghaLayout.build(dc, 1, 1, prefix="megha-central")
    return MeghaLayout.build(dc, opts.lms or n_lms, opts.gms or n_gms, prefix="megha")


def gm_settings(opts: MeghaOptions) -> dict[str, Any]:
    """The keyword arguments of :class:`GlobalMaster` that come from the options."""
    return {
        "policy": opts.policy,
        "batch_size": opts.batch_size,
        "repartition": opts.repartition,
        "preemption": opts.preemption,
        "preempt_candidates": opts.preempt_candidates,
        "fair_period": opts.heartbeat,
        "queue": opts.queue,
        "partition_order": opts.partition_order,
        "reject": opts.reject,
        "matching": opts.matching,
        "full_pull": opts.full_pull,
        "handoff_after": opts.handoff_after,
        "handoff_rare": opts.handoff_rare,
    }


def lm_settings(opts: MeghaOptions) -> dict[str, Any]:
    """The keyword arguments of :class:`LocalMaster` that come from the options."""
    return {"heartbeat": opts.heartbeat, "reply_always": opts.reply_always}


def fair_share(opts: MeghaOptions, layout: MeghaLayout) -> FairShare | None:
    """The fairness shares of ``opts`` over ``layout`` (``None`` without ``shares``).

    Usage units are running tasks in slot mode, CPU (the first resource) in resource mode; each user queue is at
    GM ``user_gms[u]`` (default ``u mod G``). Raises ValueError for shares outside [0, 1] in sum, InputError for a
    user queue mapped to a GM that does not exist."""
    if not opts.shares:
        return None
    shares = np.asarray(opts.shares, dtype=np.float64)
    if (shares < 0).any() or shares.sum() > 1 + 1e-9:
        raise ValueError("fairness shares must be >= 0 and sum to at most 1")
    n_users, n_gms = shares.size, layout.n_gms
    user_gm = np.asarray(opts.user_gms if opts.user_gms is not None else [u % n_gms for u in range(n_users)])
    if user_gm.size != n_users or (user_gm < 0).any() or (user_gm >= n_gms).any():
        raise InputError(f"user_gms must give a GM in 0..{n_gms - 1} for each of the {n_users} users")
    total = float(layout.n_workers) if layout.capacity is None else float(layout.capacity[:, 0].sum())
    return FairShare(shares, user_gm, total)


def job_users(
    opts: MeghaOptions, n_users: int, n_jobs: int, trace_users: np.ndarray | None, rng: np.random.Generator
) -> np.ndarray:
    """The user queue (0..n_users-1) of each of ``n_jobs`` jobs, as ``opts.users`` says: the trace's users modulo
    ``n_users`` (``trace``, when the trace has them), round robin by job, else drawn from ``rng`` (``random``)."""
    if trace_users is not None and opts.users == "trace":
        return np.asarray(trace_users, dtype=np.int64) % n_users
    if opts.users == "round-robin":
        return np.arange(n_jobs, dtype=np.int64) % n_users
    return rng.integers(0, n_users, size=n_jobs)


@dataclass(frozen=True)
class MeghaParts:
    """What every GM and LM of one Megha deployment is built from (see :func:`megha_parts`)."""

    opts: MeghaOptions
    layout: MeghaLayout
    fair: FairShare | None

    def gm(
        self,
        g: int,
        recorder: Recorder | None,
        *,
        job_user: np.ndarray | None = None,
        cls: type[G] = GlobalMaster,
        **extra: Any,
    ) -> G:
        """GM ``g`` (``job_user``: each job's user queue by job index, else the user each job arrives with;
        ``cls``: a subclass, given ``extra`` keywords of its own)."""
        return cls(g, self.layout, recorder, fair=self.fair, job_user=job_user, **gm_settings(self.opts), **extra)

    def lm(self, lm: int, recorder: Recorder | None, *, cls: type[L] = LocalMaster, **extra: Any) -> L:
        """LM ``lm`` (``cls``: a subclass, given ``extra`` keywords of its own)."""
        return cls(lm, self.layout, recorder, fair=self.fair, **lm_settings(self.opts), **extra)

    def gm_of_user(self, users: np.ndarray) -> np.ndarray:
        """The GM of each user queue in ``users`` (fairness shares only: a user's jobs all go to its GM)."""
        if self.fair is None:
            raise ValueError("user queues map to GMs only with fairness shares")
        return self.fair.user_gm[np.asarray(users, dtype=np.int64)]


def megha_parts(opts: MeghaOptions, layout: MeghaLayout) -> MeghaParts:
    """The settings, fairness shares and combination checks of a Megha deployment of ``layout`` from ``opts``.

    Raises InputError for settings that do not combine (fairness shares need queue=fifo and matching=offer;
    ``handoff_after`` needs slot mode, no shares, queue=fifo and matching=offer)."""
    fair = fair_share(opts, layout)
    if fair is not None and (opts.queue != "fifo" or opts.matching != "offer"):
        raise InputError("megha: fairness shares need queue=fifo and matching=offer (one FIFO queue per user)")
    if opts.handoff_after is not None and (
        fair is not None or layout.capacity is not None or opts.queue != "fifo" or opts.matching != "offer"
    ):
        raise InputError("megha: handoff_after needs slot mode, no fairness shares, queue=fifo and matching=offer")
    return MeghaParts(opts, layout, fair)


def make_gm(
    g: int,
    layout: MeghaLayout,
    recorder: Recorder | None,
    opts: MeghaOptions,
    *,
    fair: FairShare | None = None,
    job_user: np.ndarray | None = None,
    cls: type[G] = GlobalMaster,
    **extra: Any,
) -> G:
    """GM ``g`` of ``layout`` configured by ``opts`` with the fairness state ``fair`` (``cls``: a subclass, given
    ``extra`` keywords of its own). :meth:`MeghaParts.gm` is this with the fairness shares of the options."""
    return MeghaParts(opts, layout, fair).gm(g, recorder, job_user=job_user, cls=cls, **extra)


def make_lm(
    lm: int,
    layout: MeghaLayout,
    recorder: Recorder | None,
    opts: MeghaOptions,
    *,
    fair: FairShare | None = None,
    cls: type[L] = LocalMaster,
    **extra: Any,
) -> L:
    """LM ``lm`` of ``layout`` configured by ``opts`` with the fairness state ``fair`` (``cls``: a subclass, given
    ``extra`` keywords of its own). :meth:`MeghaParts.lm` is this with the fairness shares of the options."""
    return MeghaParts(opts, layout, fair).lm(lm, recorder, cls=cls, **extra)
