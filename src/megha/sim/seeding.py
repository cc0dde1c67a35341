"""One seeding convention for every random stream of a run: a stream is named, never numbered by creation order.

``named_stream(seed, *key)`` is a :class:`numpy.random.Generator` from ``SeedSequence([seed, *key])``, where each
part of the key is an integer or a name (a string, hashed with CRC-32). Streams with different keys are
independent, and a stream depends only on the run's seed and its own key — so adding a component, a purpose or a
draw anywhere changes no other stream. The runner keys the purposes of a run by number (task constraints 1,
datacenter 2, scheduler 3, engine 4); the engine keys each component by its address.
"""

from __future__ import annotations

import zlib

import numpy as np


def key_part(part: int | str) -> int:
    """An integer for one part of a stream's key: integers as they are, names by their CRC-32."""
    if isinstance(part, str):
        return zlib.crc32(part.encode())
    return int(part)


def named_stream(seed: int, *key: int | str) -> np.random.Generator:
    """The generator of the stream ``key`` of a run seeded ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *(key_part(k) for k in key)]))
