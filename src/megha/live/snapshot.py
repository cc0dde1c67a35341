"""Snapshots of a replicated LM: what lets its replication log be compacted.

An active LM writes, every ``ha.compact_every`` records, a ``snapshot`` record into its replication log: the
state of its component, its port (sequence numbers, timers, the outputs a successor re-sends) and of the
streams it receives (highest delivered sequence numbers, held messages), i.e. its state after every earlier
record. Once the broker stored it, every earlier record is purged. A standby that follows the log skips the
snapshot (it has applied the same records); one that starts later begins with it and applies what follows.

The encoding is data only — msgpack of tagged values: ``None``, booleans, numbers (integers of any size),
strings, bytes, lists, tuples, sets, deques, dicts, counters, numpy arrays (numeric and boolean dtypes) and
scalars, and objects of the scheduler's own classes (``megha.schedulers``, ``megha.model``,
``megha.live.masters``; recreated without calling their constructors, attribute by attribute). Decoding never
imports a module or calls anything else. A value of another kind, or a mutable object reachable twice (its
sharing would not survive), makes :func:`dump_state` raise :class:`SnapshotError`: the LM then keeps its whole
log (logged once) rather than risk a standby that differs from its active. A snapshot keeps the latest outputs
of the re-send ring that fit in 256 KiB; one too large for the broker's 1 MB message limit is not written (the
log is compacted at a later snapshot).
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from typing import Any

import msgpack
import numpy as np

from megha.sim.component import Component

ALLOWED_MODULES = ("megha.schedulers.", "megha.model.", "megha.live.masters")
SKIP = frozenset({"port", "layout", "rec", "_handlers", "address"})  # rebuilt by the component's constructor
_KINDS = "biuf"


class SnapshotError(ValueError):
    """A state that cannot be written (or read back) as a snapshot."""


def _allowed(cls: type) -> bool:
    mod = getattr(cls, "__module__", "") or ""
    return (
        isinstance(cls, type)
        and any(mod == m or mod.startswith(m) for m in ALLOWED_MODULES)
        and not issubclass(cls, Component)
    )


def _attrs(o: Any) -> list[tuple[str, Any]]:
    out = list(vars(o).items()) if hasattr(o, "__dict__") else []
    for klass in type(o).__mro__:
        for s in getattr(klass, "__slots__", ()):
            if s not in ("__dict__", "__weakref__") and hasattr(o, s):
                out.append((s, getattr(o, s)))
    return out


class _Enc:
    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.keep: list[Any] = []  # the objects whose ids are in ``seen`` (ids stay unique while they live)

    def _once(self, v: Any, path: str) -> None:
        if id(v) in self.seen:
            raise SnapshotError(f"{path}: a mutable object is reachable twice (its sharing would be lost)")
        self.seen.add(id(v))
        self.keep.append(v)

    def enc(self, v: Any, path: str) -> Any:
        t = type(v)
        if v is None or t is bool or t is int or t is float or t is str or t is bytes:
            if t is int and not -(1 << 63) <= v < (1 << 64):
                if abs(v) >= 1 << 4096:
                    raise SnapshotError(f"{path}: integer too large")
                return ["I", str(v)]  # a generator's 128-bit state
            return v
        if t is np.ndarray:
            self._once(v, path)
            if v.dtype.kind not in _KINDS or v.dtype.byteorder == ">" or v.ndim > 3:
                raise SnapshotError(f"{path}: arrays of dtype {v.dtype} (rank {v.ndim}) are not written")
            return ["a", v.dtype.str, list(v.shape), np.ascontiguousarray(v).tobytes()]
        if isinstance(v, np.generic):
            if v.dtype.kind not in _KINDS:
                raise SnapshotError(f"{path}: numpy scalar of dtype {v.dtype}")
            return ["n", v.dtype.str, v.item()]
        if t is tuple:
            return ["t", [self.enc(x, f"{path}[{i}]") for i, x in enumerate(v)]]
        if t is frozenset:
            return ["f", [self.enc(x, f"{path}{{}}") for x in v]]
        if t is list or t is set or t is deque:
            self._once(v, path)
            items = [self.enc(x, f"{path}[{i}]") for i, x in enumerate(v)]
            if t is deque:
                return ["q", -1 if v.maxlen is None else v.maxlen, items]
            return ["l" if t is list else "s", items]
        if t is dict or t is Counter:
            self._once(v, path)
            return [
                "d" if t is dict else "c",
                [[self.enc(k, f"{path}.key"), self.enc(x, f"{path}[{k!r}]")] for k, x in v.items()],
            ]
        if t is np.random.Generator:
            self._once(v, path)
            return ["g", self.enc(v.bit_generator.state, f"{path}.state")]
        if _allowed(t):
            self._once(v, path)
            return [
                "o",
                t.__module__,
                t.__qualname__,
                [[k, self.enc(x, f"{path}.{k}")] for k, x in _attrs(v)],
            ]
        raise SnapshotError(f"{path}: a value of type {t.__module__}.{t.__qualname__} is not written")


def _dec(x: Any) -> Any:
    if type(x) is not list:
        return x
    if not x or type(x[0]) is not str:
        raise SnapshotError("malformed snapshot value")
    tag = x[0]
    try:
        if tag == "a":
            _, dt, shape, raw = x
            dtype = np.dtype(dt)
            if dtype.kind not in _KINDS or dtype.hasobject:
                raise SnapshotError(f"array dtype {dt!r} is not read")
            return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if tag == "I":
            if type(x[1]) is not str or len(x[1]) > 1300:
                raise SnapshotError("malformed large integer")
            return int(x[1])
        if tag == "n":
            dtype = np.dtype(x[1])
            if dtype.kind not in _KINDS:
                raise SnapshotError(f"scalar dtype {x[1]!r} is not read")
            return dtype.type(x[2])
        if tag == "t":
            return tuple(_dec(i) for i in x[1])
        if tag == "f":
            return frozenset(_dec(i) for i in x[1])
        if tag == "l":
            return [_dec(i) for i in x[1]]
        if tag == "s":
            return {_dec(i) for i in x[1]}
        if tag == "q":
            return deque((_dec(i) for i in x[2]), maxlen=None if x[1] < 0 else x[1])
        if tag in ("d", "c"):
            d = {_dec(k): _dec(v) for k, v in x[1]}
            return Counter(d) if tag == "c" else d
        if tag == "g":
            g = np.random.default_rng()
            g.bit_generator.state = _dec(x[1])
            return g
        if tag == "o":
            _, mod, qual, attrs = x
            cls: Any = sys.modules.get(mod)  # never imports: the class's module is loaded in a service already
            for part in str(qual).split("."):
                cls = getattr(cls, part, None)
            if cls is None or not _allowed(cls):
                raise SnapshotError(f"class {mod}.{qual} is not read")
            o = cls.__new__(cls)
            for k, v in attrs:
                object.__setattr__(o, str(k), _dec(v))
            return o
    except SnapshotError:
        raise
    except Exception as e:
        raise SnapshotError(f"malformed snapshot value ({tag}): {type(e).__name__}: {e}") from e
    raise SnapshotError(f"unknown snapshot tag {tag!r}")


def dump_state(state: dict[str, Any]) -> bytes:
    """Encode ``state`` (a map of names to values; see the module docs); raises :class:`SnapshotError`."""
    e = _Enc()
    return msgpack.packb([[k, e.enc(v, k)] for k, v in state.items()], use_bin_type=True)


def load_state(data: bytes) -> dict[str, Any]:
    """Decode what :func:`dump_state` wrote; raises :class:`SnapshotError`."""
    try:
        items = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as e:
        raise SnapshotError(f"not a snapshot: {e}") from e
    if type(items) is not list:
        raise SnapshotError("not a snapshot")
    return {str(k): _dec(v) for k, v in items}


def component_state(comp: Component) -> dict[str, Any]:
    """A component's own attributes (those its constructor rebuilds from the configuration are left out)."""
    return {k: v for k, v in vars(comp).items() if k not in SKIP}
