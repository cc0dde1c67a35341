"""Megha's GMs, LMs and partitioning from :class:`~megha.schedulers.megha.MeghaOptions`: the one construction
that the simulator's builder (:func:`megha.schedulers.megha.build_megha`) and the live runtime
(:mod:`megha.live.deploy`) both use.

Each function takes the options model itself, so a setting reaches a GM or an LM the same way in a simulation
and in a real deployment; the caller adds what only it knows (the simulator: fairness state drawn from the
workload, in-process workers, heartbeat phase; the live runtime: its subclasses of the masters and their
service settings) through ``cls`` and the extra keywords.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

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


def make_gm(
    g: int,
    layout: MeghaLayout,
    recorder: Recorder,
    opts: MeghaOptions,
    *,
    fair: FairShare | None = None,
    job_user: np.ndarray | None = None,
    cls: type[G] = GlobalMaster,
    **extra: Any,
) -> G:
    """GM ``g`` of ``layout`` configured by ``opts`` (``cls``: a subclass, given ``extra`` keywords of its own)."""
    return cls(g, layout, recorder, fair=fair, job_user=job_user, **gm_settings(opts), **extra)


def make_lm(
    lm: int,
    layout: MeghaLayout,
    recorder: Recorder,
    opts: MeghaOptions,
    *,
    fair: FairShare | None = None,
    cls: type[L] = LocalMaster,
    **extra: Any,
) -> L:
    """LM ``lm`` of ``layout`` configured by ``opts`` (``cls``: a subclass, given ``extra`` keywords of its own)."""
    return cls(lm, layout, recorder, fair=fair, **lm_settings(opts), **extra)
