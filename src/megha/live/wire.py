"""The wire format: versioned, schema-checked msgpack envelopes (never pickle).

An envelope is a msgpack array::

    [version, type, src, dst, epoch, seq, term, body]

* ``version`` — :data:`VERSION`; another version is rejected.
* ``type`` — the message class name; it must be in :data:`SCHEMAS` (every Megha message, the worker messages
  ``JobArrival``/``Launch``/``Finished``/``Kill``/``Killed`` and the live-only messages of
  :mod:`megha.live.messages`).
* ``src``/``dst`` — logical addresses (``megha/gm0``, ``megha/lm1``, ``events`` …).
* ``epoch``, ``seq``, ``term`` — delivery metadata for exactly-once delivery per (src, dst) stream: ``epoch``
  names one incarnation of the sender's state, ``seq`` numbers its messages to ``dst`` (0 = not deduplicated),
  ``term`` fences a deposed active LM (see :mod:`megha.live.runtime`).
* ``body`` — a map of the message's fields. A 1-D numpy array travels as msgpack extension type 2 (one byte
  naming its dtype — the index in :data:`_DTYPE_CODES` — then the raw little-endian elements: no nested msgpack,
  decoded with one ``numpy.frombuffer``); a 2-D one as extension type 1 (``[dtype, shape, raw bytes]``,
  little-endian, whitelisted dtypes), which decoders also accept for 1-D arrays. Python lists of numbers stay
  lists.

Decoding checks every field against the type's schema (kind, element types, array dtype and rank, no
missing or extra fields) and the type's cross-field rules (equal lengths of per-task columns); anything else
raises :class:`WireError`, which services log and count before going on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from megha.live import messages as L
from megha.schedulers.common import messages as C
from megha.schedulers.megha import messages as M

VERSION = 1
_EXT_ND = 1
_EXT_1D = 2
_DTYPE_CODES = ("<i8", "<i4", "<u4", "<u8", "<f8", "<f4", "|b1", "|u1")  # extension type 2: the first byte
_DTYPES = frozenset(_DTYPE_CODES)
_CODE_OF = {d: bytes([k]) for k, d in enumerate(_DTYPE_CODES)}
_NP_DTYPES = tuple(np.dtype(d) for d in _DTYPE_CODES)
MAX_STR = 4096


class WireError(ValueError):
    """A message that cannot be decoded or does not match its schema."""


@dataclass(slots=True)
class Envelope:
    """A decoded message with its delivery metadata."""

    type: str
    src: str
    dst: str
    epoch: int
    seq: int
    term: int
    msg: Any
    resent: bool = False  # re-sent by a standby taking over (see :func:`mark_resent`)
    made_at: float = 0.0  # a re-sent message: when the active made it (0: unknown)


# --- encoding -------------------------------------------------------------------------------------------
_ExtType = msgpack.ExtType
_CODE_BY_DTYPE = {np.dtype(d): _CODE_OF[d] for d in _DTYPE_CODES}


def _default(o: Any) -> Any:
    if type(o) is np.ndarray and o.ndim == 1 and o.flags.c_contiguous:  # the common case, fast
        code = _CODE_BY_DTYPE.get(o.dtype)
        if code is not None:
            return _ExtType(_EXT_1D, code + o.tobytes())
    if isinstance(o, np.ndarray):
        a = np.ascontiguousarray(o)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        if a.dtype.str not in _DTYPES:
            if a.dtype.kind == "i":
                a = a.astype("<i8")
            elif a.dtype.kind == "u":
                a = a.astype("<u8")
            elif a.dtype.kind == "f":
                a = a.astype("<f8")
            elif a.dtype.kind == "b":
                a = a.astype("|b1")
            else:
                raise WireError(f"cannot send a numpy array of dtype {a.dtype}")
        if a.ndim == 1:
            return msgpack.ExtType(_EXT_1D, _CODE_OF[a.dtype.str] + a.tobytes())
        return msgpack.ExtType(_EXT_ND, msgpack.packb([a.dtype.str, list(a.shape), a.tobytes()]))
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, tuple):
        return list(o)
    raise WireError(f"cannot encode a value of type {type(o).__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_1D:
        if not data or data[0] >= len(_NP_DTYPES):
            raise WireError("malformed array header (unknown dtype code)")
        dtype = _NP_DTYPES[data[0]]
        if (len(data) - 1) % dtype.itemsize:
            raise WireError("array size is not a whole number of elements")
        a = np.frombuffer(data, dtype=dtype, offset=1).copy()
        if dtype.kind == "b" and a.size and not (a.view(np.uint8) <= 1).all():
            raise WireError("boolean array holds values other than 0 and 1")
        return a
    if code != _EXT_ND:
        raise WireError(f"unknown msgpack extension type {code}")
    try:
        dt, shape, raw = msgpack.unpackb(data, raw=False)
    except Exception as e:
        raise WireError(f"malformed array: {e}") from e
    if dt not in _DTYPES or not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise WireError(f"malformed array header {dt!r} {shape!r}")
    if len(shape) > 2:
        raise WireError(f"arrays of rank {len(shape)} are not allowed")
    dtype = np.dtype(dt)
    if not isinstance(raw, bytes) or len(raw) != math.prod(shape) * dtype.itemsize:
        raise WireError("array size does not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


_packer = msgpack.Packer(default=_default, use_bin_type=True, autoreset=True)


def encode(msg: Any, src: str, dst: str, epoch: int = 0, seq: int = 0, term: int = 0) -> bytes:
    """Serialize ``msg`` (an instance of a registered message class) with its delivery metadata."""
    name = type(msg).__name__
    schema = SCHEMAS.get(name)
    if schema is None or schema.cls is not type(msg):
        raise WireError(f"{name} is not a registered wire message")
    body = {f: getattr(msg, f) for f in schema.names}
    if schema.omit_none:  # optional columns left out when None: the message is what it was before they existed
        for f in schema.omit_none:
            if body[f] is None:
                del body[f]
    return _packer.pack([VERSION, name, src, dst, epoch, seq, term, body])


def mark_resent(data: bytes, made_at: float = 0.0) -> bytes:
    """The same encoded message flagged as *re-sent*: a standby taking over sends again what its active may have
    sent last. ``made_at`` is when the active made it (wall-clock seconds). A receiver that never heard of the
    stream takes it when it was already up at ``made_at`` (the message was meant for it: the dead active never
    sent it) and drops it when it started since (the message was meant for its previous incarnation)."""
    if not data or data[0] != 0x98:  # a fixarray of the 8 envelope fields
        raise WireError("not an envelope")
    return b"\x99" + bytes(data[1:]) + (_packer.pack(float(made_at)) if made_at > 0 else b"\x01")


# --- bundles --------------------------------------------------------------------------------------------
BUNDLE_MARK = b"\xc1"  # a byte msgpack never uses: no envelope starts with it
BUNDLE_MAX_BYTES = 256 * 1024  # a bundle stays well under nats-server's 1 MB payload limit
MAX_BUNDLE = 4096  # envelopes in one bundle


def pack_bundle(parts: list[bytes]) -> bytes:
    """Several encoded envelopes for one durable subject as one broker message (one store, one acknowledgement,
    one delivery): :data:`BUNDLE_MARK` then a msgpack array of the envelopes as bytes. Receivers handle the parts in
    order, each as if it had come alone (:func:`unpack_bundle`); each keeps its own sequence number, so a bundle
    published twice is dropped part by part like any duplicate."""
    return BUNDLE_MARK + _packer.pack(parts)


def unpack_bundle(data: bytes) -> list[bytes] | None:
    """The envelopes of a bundle; ``None`` when ``data`` is not a well-formed bundle (the receiver then rejects it
    as a malformed message)."""
    if data[:1] != BUNDLE_MARK:
        return None
    try:
        parts = msgpack.unpackb(memoryview(data)[1:], raw=False, max_array_len=MAX_BUNDLE)
    except Exception:
        return None
    if type(parts) is not list or not parts or not all(type(p) is bytes for p in parts):
        return None
    return parts


# --- schema checking ------------------------------------------------------------------------------------
def _is_num(x: Any) -> bool:
    t = type(x)
    return (t is int or t is float) and t is not bool


def _k_int(v: Any) -> Any:
    if type(v) is not int:
        raise WireError("expected an integer")
    return v


def _k_float(v: Any) -> Any:
    if not _is_num(v):
        raise WireError("expected a number")
    return float(v)


def _k_float_opt(v: Any) -> Any:
    return None if v is None else _k_float(v)


def _k_masks_opt(v: Any) -> Any:
    return None if v is None else K_MASKS_ARR(v)


def _k_bool(v: Any) -> Any:
    if type(v) is not bool:
        raise WireError("expected a boolean")
    return v


def _k_str(v: Any) -> Any:
    if type(v) is not str or len(v) > MAX_STR:
        raise WireError("expected a string (at most 4096 characters)")
    return v


def _k_bytes(v: Any) -> Any:
    if type(v) is not bytes:
        raise WireError("expected bytes")
    return v


_INT_T = frozenset({int})
_NUM_T = frozenset({int, float})


def _vector(kinds: str, what: str, types: frozenset, to: str | None) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if type(v) is list:
            if v and not set(map(type, v)) <= types:
                raise WireError(f"expected a list of {what}")
            return v if to is None else np.asarray(v, dtype=to).reshape(-1)
        if isinstance(v, np.ndarray):
            if v.ndim != 1 or v.dtype.kind not in kinds:
                raise WireError(f"expected a 1-D array of {what}, got {v.dtype} with {v.ndim} dims")
            return v if to is None else v.astype(to, copy=False)
        raise WireError(f"expected a list of {what}")

    return check


def _k_state(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if (v.ndim == 1 and v.dtype.kind == "b") or (v.ndim == 2 and v.dtype.kind == "f"):
            return v
        raise WireError(f"expected worker state as bools or an [n, R] float array, got {v.dtype} {v.shape}")
    if type(v) is not list or (v and set(map(type, v)) != {bool}):
        raise WireError("expected a list of booleans")
    return v


def _k_mat_opt(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, np.ndarray) or v.ndim != 2 or v.dtype.kind not in "fiu":
        raise WireError("expected None or an [n, R] numeric array")
    return v.astype(np.float64, copy=False)


def _k_vec_opt(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, np.ndarray) or v.ndim != 1 or v.dtype.kind not in "fiu":
        raise WireError("expected None or a 1-D numeric array")
    return v.astype(np.float64, copy=False)


def _k_events(v: Any) -> Any:
    if type(v) is not list:
        raise WireError("expected a list of events")
    for it in v:
        if (
            type(it) is not list
            or len(it) != 5
            or it[0] not in L.EVENT_KINDS
            or not _is_num(it[1])
            or type(it[2]) is not list
            or (it[2] and not set(map(type, it[2])) <= _INT_T)
            or type(it[3]) is not list
            or (it[3] and not set(map(type, it[3])) <= _INT_T)
            or type(it[4]) is not str
        ):
            raise WireError("malformed event (expected [kind, time, [task ids], [ints], note])")
    return v


def _k_bytes_list(v: Any) -> Any:
    if type(v) is not list or len(v) > 1_000_000 or not all(type(x) is bytes for x in v):
        raise WireError("expected a list of byte strings")
    return v


def _k_info(v: Any) -> Any:
    if type(v) is not dict or len(v) > 256:
        raise WireError("expected a map")
    for k, x in v.items():
        if type(k) is not str:
            raise WireError("map keys must be strings")
        if not (
            x is None
            or type(x) in (int, float, bool, str)
            or (type(x) is list and all(type(y) in (int, float, str, bool) for y in x))
            or (type(x) is dict and all(type(a) is str and type(b) in (int, float) for a, b in x.items()))
        ):
            raise WireError(f"map value {k!r} has an unsupported type")
    return v


K_INT, K_FLOAT, K_BOOL, K_STR, K_BYTES = _k_int, _k_float, _k_bool, _k_str, _k_bytes
K_IDS = _vector("iu", "integers", _INT_T, None)
K_IDS_ARR = _vector("iu", "integers", _INT_T, "<i8")
K_MASKS_ARR = _vector("iu", "integers", _INT_T, "<u4")
K_FLOATS = _vector("fiu", "numbers", _NUM_T, None)


def _k_ids_opt(v: Any) -> Any:
    return None if v is None else K_IDS(v)


K_FLOATS_ARR = _vector("fiu", "numbers", _NUM_T, "<f8")


def _k_floats_opt(v: Any) -> Any:
    return None if v is None else K_FLOATS(v)


@dataclass(frozen=True)
class Schema:
    cls: type
    fields: tuple[tuple[str, Callable[[Any], Any]], ...]
    same_length: tuple[str, ...] = ()  # per-task columns that must have equal lengths
    rows_of: tuple[str, str] | None = None  # (matrix field, column it must have as many rows as)
    omit_none: tuple[str, ...] = ()  # fields added later: left out of the body when None, read as None when absent

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(f for f, _ in self.fields))
        object.__setattr__(self, "name_set", frozenset(self.names))
        object.__setattr__(self, "required", frozenset(self.names) - frozenset(self.omit_none))


def _s(
    cls: type,
    *fields: tuple[str, Callable],
    same: tuple[str, ...] = (),
    rows: tuple[str, str] | None = None,
    omit_none: tuple[str, ...] = (),
) -> tuple[str, Schema]:
    return cls.__name__, Schema(cls, tuple(fields), same, rows, omit_none)


SCHEMAS: dict[str, Schema] = dict(
    [
        _s(
            C.JobArrival,
            ("job", K_INT),
            ("tasks", K_IDS_ARR),
            ("durations", K_FLOATS_ARR),
            ("masks", K_MASKS_ARR),
            ("demands", _k_mat_opt),
            ("user", K_INT),
            ("mean_duration", K_FLOAT),
            ("priority", K_INT),
            same=("tasks", "durations", "masks"),
            rows=("demands", "tasks"),
        ),
        _s(
            C.Launch,
            ("tasks", K_IDS),
            ("workers", K_IDS),
            ("durations", K_FLOATS),
            ("reply_to", K_STR),
            ("demands", _k_mat_opt),
            same=("tasks", "workers", "durations"),
            rows=("demands", "tasks"),
        ),
        _s(
            C.Finished,
            ("tasks", K_IDS),
            ("workers", K_IDS),
            ("demands", _k_mat_opt),
            same=("tasks", "workers"),
            rows=("demands", "tasks"),
        ),
        _s(C.Kill, ("tasks", K_IDS), ("reply_to", K_STR)),
        _s(
            C.Killed,
            ("tasks", K_IDS),
            ("workers", K_IDS),
            ("demands", _k_mat_opt),
            same=("tasks", "workers"),
            rows=("demands", "tasks"),
        ),
        _s(
            M.LaunchRequest,
            ("gm", K_INT),
            ("req", K_INT),
            ("tasks", K_IDS),
            ("workers", K_IDS),
            ("durations", K_FLOATS),
            ("users", K_IDS),
            ("demands", _k_mat_opt),
            same=("tasks", "workers", "durations", "users"),
            rows=("demands", "tasks"),
        ),
        _s(
            M.LaunchReply,
            ("lm", K_INT),
            ("req", K_INT),
            ("rejected", K_IDS),
            ("delta_workers", K_IDS),
            ("delta_state", _k_state),
            ("usage", _k_vec_opt),
            ("acked", K_INT),
            same=("delta_workers", "delta_state"),
        ),
        _s(
            M.TaskDone,
            ("lm", K_INT),
            ("tasks", K_IDS),
            ("workers", K_IDS),
            ("demands", _k_mat_opt),
            ("acked", K_INT),
            same=("tasks", "workers"),
            rows=("demands", "tasks"),
        ),
        _s(
            M.StateDelta,
            ("lm", K_INT),
            ("workers", K_IDS),
            ("state", _k_state),
            ("full", K_BOOL),
            ("usage", _k_vec_opt),
            ("acked", K_INT),
            same=("workers", "state"),
        ),
        _s(M.SyncRequest, ("gm", K_INT)),
        _s(
            M.PreemptRequest,
            ("gm", K_INT),
            ("tasks", K_IDS_ARR),
            ("durations", K_FLOATS_ARR),
            ("masks", K_MASKS_ARR),
            ("user", K_INT),
            ("victim", K_INT),
            ("demands", _k_mat_opt),
            ("victim_elsewhere", _k_float_opt),
            same=("tasks", "durations", "masks"),
            rows=("demands", "tasks"),
        ),
        _s(
            M.PreemptReply,
            ("lm", K_INT),
            ("request", K_INT),
            ("ok", K_BOOL),
            ("task", K_INT),
            ("delta_workers", K_IDS_ARR),
            ("delta_state", _k_state),
            ("usage", _k_vec_opt),
            ("acked", K_INT),
            ("worker", K_INT),
            ("victim_masks", _k_masks_opt),
            same=("delta_workers", "delta_state"),
        ),
        _s(M.Preempted, ("lm", K_INT), ("tasks", K_IDS_ARR), ("acked", K_INT)),
        _s(
            M.Handoff,
            ("gm", K_INT),
            ("tasks", K_IDS),
            ("durations", K_FLOATS),
            ("masks", K_IDS),
            ("users", K_IDS),
            ("arrivals", K_FLOATS),
            same=("tasks", "durations", "masks", "users", "arrivals"),
        ),
        _s(
            L.HostBeat,
            ("host", K_STR),
            ("epoch", K_INT),
            ("lm", K_INT),
            ("workers", K_IDS),
            ("running", K_IDS),
            ("period", K_FLOAT),
        ),
        _s(
            L.HostLaunch,
            ("host", K_STR),
            ("epoch", K_INT),
            ("tasks", K_IDS),
            ("workers", K_IDS),
            ("durations", K_FLOATS),
            ("reply_to", K_STR),
            ("demands", _k_mat_opt),
            same=("tasks", "workers", "durations"),
            rows=("demands", "tasks"),
        ),
        _s(L.HostKill, ("host", K_STR), ("epoch", K_INT), ("tasks", K_IDS), ("reply_to", K_STR)),
        _s(
            L.Relaunch,
            ("lm", K_INT),
            ("tasks", K_IDS),
            ("durations", K_FLOATS),
            ("masks", K_IDS),
            ("demands", _k_mat_opt),
            ("users", _k_ids_opt),
            same=("tasks", "durations", "masks"),
            rows=("demands", "tasks"),
        ),
        _s(
            L.JobBatch,
            ("jobs", K_IDS_ARR),
            ("sizes", K_IDS_ARR),
            ("tasks", K_IDS_ARR),
            ("durations", K_FLOATS_ARR),
            ("masks", K_MASKS_ARR),
            ("demands", _k_mat_opt),
            ("users", K_IDS_ARR),
            ("mean_durations", K_FLOATS_ARR),
            ("priorities", K_IDS_ARR),
            same=("tasks", "durations", "masks"),
            rows=("demands", "tasks"),
        ),
        _s(
            L.Holding,
            ("lm", K_INT),
            ("tasks", K_IDS),
            ("users", _k_ids_opt),
            ("durations", _k_floats_opt),
            ("masks", _k_ids_opt),
            ("demands", _k_mat_opt),
            same=("tasks", "users", "durations", "masks"),
            rows=("demands", "tasks"),
            omit_none=("users", "durations", "masks", "demands"),
        ),
        _s(L.RunSpec, ("run", K_INT), ("kind", K_STR), ("command", K_STR), ("cwd", K_STR)),
        _s(L.Events, ("src", K_STR), ("items", _k_events)),
        _s(
            L.Status,
            ("src", K_STR),
            ("kind", K_STR),
            ("role", K_STR),
            ("epoch", K_INT),
            ("t", K_FLOAT),
            ("info", _k_info),
        ),
        _s(
            L.Repl,
            ("lm", K_INT),
            ("n", K_INT),
            ("what", K_STR),
            ("now", K_FLOAT),
            ("key", K_STR),
            ("data", K_BYTES),
            ("pos", K_INT),
        ),
        _s(L.ReplBatch, ("lm", K_INT), ("records", _k_bytes_list)),
        _s(L.Control, ("cmd", K_STR), ("arg", K_STR)),
    ]
)


def _length(v: Any) -> int:
    return int(v.shape[0]) if isinstance(v, np.ndarray) else len(v)


def decode(data: bytes) -> Envelope:
    """Parse and check one envelope; raises :class:`WireError` naming what is wrong."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireError("a message must be bytes")
    try:
        obj = msgpack.unpackb(data, raw=False, ext_hook=_ext_hook, strict_map_key=True)
    except WireError:
        raise
    except Exception as e:
        raise WireError(f"not a msgpack message: {type(e).__name__}: {e}") from e
    if type(obj) is not list or len(obj) not in (8, 9):
        raise WireError("an envelope is [version, type, src, dst, epoch, seq, term, body(, re-sent: 1 or time made)]")
    resent = False
    made_at = 0.0
    if len(obj) == 9:
        if type(obj[8]) is float and math.isfinite(obj[8]) and obj[8] > 0:
            made_at = obj[8]
        elif obj[8] != 1 or type(obj[8]) is not int:
            raise WireError("the ninth envelope field (re-sent) must be 1 or the time the message was made")
        resent = True
    version, name, src, dst, epoch, seq, term, body = obj[:8]
    if version != VERSION:
        raise WireError(f"unsupported wire version {version!r} (this build speaks {VERSION})")
    if type(name) is not str:
        raise WireError("message type must be a string")
    schema = SCHEMAS.get(name)
    if schema is None:
        raise WireError(f"unknown message type {name[:64]!r}")
    if type(src) is not str or type(dst) is not str or len(src) > 256 or len(dst) > 256:
        raise WireError("src and dst must be short strings")
    if type(epoch) is not int or type(seq) is not int or type(term) is not int or seq < 0 or term < 0:
        raise WireError("epoch, seq and term must be integers (seq, term >= 0)")
    if type(body) is not dict:
        raise WireError(f"{name}: body must be a map")
    omit = schema.omit_none
    if (len(body) != len(schema.fields) and not (omit and schema.required.issubset(body))) or not (
        schema.name_set.issuperset(body)
    ):
        missing = [f for f in schema.names if f not in body and f not in omit]
        extra = [str(f) for f in body if f not in schema.names]
        raise WireError(f"{name}: missing fields {missing}, unexpected fields {extra[:5]}")
    kw = {}
    for f, check in schema.fields:
        try:
            kw[f] = check(body[f]) if not omit or f in body else None
        except WireError as e:
            raise WireError(f"{name}.{f}: {e}") from None
    if schema.same_length:
        lens = {f: _length(kw[f]) for f in schema.same_length if kw[f] is not None}  # optional columns: when given
        if len(set(lens.values())) > 1:
            raise WireError(f"{name}: per-task columns differ in length {lens}")
    if schema.rows_of is not None:
        m, col = schema.rows_of
        if kw[m] is not None and kw[m].shape[0] != _length(kw[col]):
            raise WireError(f"{name}.{m}: {kw[m].shape[0]} rows for {_length(kw[col])} tasks")
    return Envelope(name, src, dst, epoch, seq, term, schema.cls(**kw), resent, made_at)
