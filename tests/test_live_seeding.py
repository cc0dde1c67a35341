"""The live runtime's seeding convention: a hosted component draws from the stream named by the seed it is hosted
with and its address (``named_stream``), as the simulator's engine gives it — so a live GM or LM draws what the
simulated component of its address draws, and an LM's standby draws what its active draws."""

from __future__ import annotations

import asyncio

import numpy as np

from megha.config import RunConfig
from megha.live.client import synthetic_workload, with_constraints
from megha.live.config import LiveConfig
from megha.live.deploy import LocalDeployment, components_seed, datacenter_of, layout_of
from megha.live.runtime import ForwardingRecorder, Runtime
from megha.live.transport import InProcBroker
from megha.runner.simulate import build
from megha.sim.component import Component
from megha.sim.seeding import named_stream


def _entropy(rng: np.random.Generator) -> list[int]:
    """The key of the stream a generator was made from (its seed sequence), whatever it has drawn since."""
    return list(rng.bit_generator.seed_seq.entropy)


class _Quiet(Component):
    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.rec = ForwardingRecorder()


def test_a_hosted_component_draws_from_the_stream_named_by_its_address() -> None:
    async def go() -> tuple[np.random.Generator, np.random.Generator]:
        rt = Runtime(InProcBroker().transport(), epoch=1)
        a = await rt.host(_Quiet("megha/a"), seed=42)
        b = await rt.host(_Quiet("megha/b"), seed=42)
        return a.port.rng, b.port.rng

    a, b = asyncio.run(go())
    assert a.bit_generator.state == named_stream(42, "megha/a").bit_generator.state
    assert b.bit_generator.state == named_stream(42, "megha/b").bit_generator.state
    assert a.bit_generator.state != b.bit_generator.state


def test_live_masters_draw_from_the_streams_of_their_simulated_twins() -> None:
    cfg = LiveConfig(
        broker={"kind": "inproc"},
        datacenter={"workers": 8, "constraints": False, "seed": 7},
        megha={"gms": 2, "lms": 2},
        workers={"hosts": 1},
        ha={"lm_standby": True},
    )
    dc = datacenter_of(cfg)
    layout = layout_of(cfg, dc)
    sim_cfg = RunConfig(scheduler="megha", trace="unused", seed=7, workers=8, gms=2, lms=2, constraints=False)
    engine = build(sim_cfg, with_constraints(cfg, synthetic_workload(4, 2, 0.1, 1.0, seed=1)), dc)[0]
    assert engine.seed == components_seed(cfg)

    async def go() -> dict[str, list[list[int]]]:
        dep = await LocalDeployment(cfg, layout=layout).start()
        try:
            got: dict[str, list[list[int]]] = {}
            for rt in [*dep.gms.values(), *dep.lms.values()]:
                for addr, h in rt.hosted.items():
                    got.setdefault(addr, []).append(_entropy(h.port.rng))
            return got
        finally:
            await dep.close()

    got = asyncio.run(go())
    masters = [layout.gm_address(g) for g in range(2)] + [layout.lm_address(lm) for lm in range(2)]
    assert set(masters) <= set(got)
    for addr in masters:
        twin = _entropy(engine.components[addr].port.rng)
        assert got[addr] == [twin] * len(got[addr]), addr
    assert all(len(got[layout.lm_address(lm)]) == 2 for lm in range(2))  # active and standby, one stream
