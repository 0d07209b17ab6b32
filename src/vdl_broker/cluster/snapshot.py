"""Snapshots of the metadata state machine (ClusterState): bytes that restore an equal state.

Every part of the state serializes itself by what it declares: the snapshot walks ClusterState's
annotated attributes and, inside them, dataclass fields by their type hints (dicts, lists,
tuples, sets, bytes, enums, `X | None`, nested dataclasses, JSON values typed `Any`). So a part
added to ClusterState, or a field added to a part, is in the next snapshot with no code here;
an attribute ClusterState does not annotate is refused (TypeError), and
tests/unit/cluster/test_snapshot.py fails for any attribute that does not come back equal. A
value that is derived from the rest, or only a cache, is named in ClusterState.TRANSIENT.

    snapshot := zstd(JSON {"format": 1, "state": {attribute: value, ...}})

A field missing from an older snapshot takes its default (a new part starts empty); a snapshot
of a newer format is refused (vdl_broker.raft.snapshots checks the file's own version).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import types
import typing
from typing import Any

import zstandard

SNAPSHOT_FORMAT = 1


def encode(value: Any, hint: Any) -> Any:
    """`value` of type `hint` as a JSON value."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        return encode(value, next(a for a in args if a is not type(None)))
    if hint is bytes:
        return base64.b64encode(value).decode()
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return {f.name: encode(getattr(value, f.name), hints[f.name]) for f in dataclasses.fields(hint)}
    if origin is dict or (isinstance(hint, type) and issubclass(hint, dict) and hint is not dict):
        key_hint, value_hint = args or _dict_args(hint)
        return [[encode(k, key_hint), encode(v, value_hint)] for k, v in value.items()]
    if origin in (set, frozenset):
        return sorted((encode(item, args[0]) for item in value), key=json.dumps)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return [encode(item, args[0]) for item in value]
    if origin is tuple:
        return [encode(item, item_hint) for item, item_hint in zip(value, args, strict=True)]
    if origin is list:
        return [encode(item, args[0]) for item in value]
    if hint in (int, str, float, bool):
        return value
    raise TypeError(f"no snapshot encoding for {hint!r}")


def decode(raw: Any, hint: Any) -> Any:
    """The value of type `hint` that encode() turned into `raw`."""
    if raw is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return raw
    if origin in (typing.Union, types.UnionType):
        return decode(raw, next(a for a in args if a is not type(None)))
    if hint is bytes:
        return base64.b64decode(raw)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(raw)
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        kwargs = {f.name: decode(raw[f.name], hints[f.name]) for f in dataclasses.fields(hint) if f.name in raw}
        return hint(**kwargs)  # type: ignore[operator]
    if origin is dict or (isinstance(hint, type) and issubclass(hint, dict) and hint is not dict):
        key_hint, value_hint = args or _dict_args(hint)
        target = hint() if origin is None else {}
        for key, value in raw:
            target[decode(key, key_hint)] = decode(value, value_hint)
        return target
    if origin in (set, frozenset):
        return origin(decode(item, args[0]) for item in raw)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple(decode(item, args[0]) for item in raw)
    if origin is tuple:
        return tuple(decode(item, item_hint) for item, item_hint in zip(raw, args, strict=True))
    if origin is list:
        return [decode(item, args[0]) for item in raw]
    if hint in (int, str, float, bool):
        return hint(raw)
    raise TypeError(f"no snapshot decoding for {hint!r}")


def _dict_args(hint: type) -> tuple[Any, Any]:
    """The key and value types of a dict subclass (class StreamTable(dict[str, StreamInfo]))."""
    for base in getattr(hint, "__orig_bases__", ()):
        if typing.get_origin(base) is dict:
            return typing.get_args(base)
    raise TypeError(f"{hint!r} does not say its key and value types")


def state_attributes(state: object) -> dict[str, Any]:
    """The attributes a snapshot holds, with their types: everything but TRANSIENT. An attribute
    without a type annotation on the class is an error (it would silently be left out)."""
    cls = type(state)
    hints = typing.get_type_hints(cls)
    transient: frozenset[str] = getattr(cls, "TRANSIENT", frozenset())
    wanted = {}
    for name in vars(state):
        if name in transient:
            continue
        if name not in hints:
            raise TypeError(f"{cls.__name__}.{name} has no type annotation: the snapshot cannot hold it "
                            f"(annotate it, or name it in {cls.__name__}.TRANSIENT if it is derived)")
        wanted[name] = hints[name]
    return wanted


def dump(state: object) -> bytes:
    body = {"format": SNAPSHOT_FORMAT,
            "state": {name: encode(getattr(state, name), hint) for name, hint in state_attributes(state).items()}}
    return zstandard.ZstdCompressor(level=3).compress(json.dumps(body, separators=(",", ":")).encode())


def load(data: bytes, into: object) -> None:
    """Set `into`'s attributes from a snapshot (a fresh state: attributes the snapshot lacks keep
    their initial values)."""
    body = json.loads(zstandard.ZstdDecompressor().decompress(data))
    found = body.get("format")
    if found != SNAPSHOT_FORMAT:
        raise ValueError(f"metadata snapshot format {found!r}; this release reads {SNAPSHOT_FORMAT}")
    hints = state_attributes(into)
    for name, raw in body["state"].items():
        if name in hints:
            setattr(into, name, decode(raw, hints[name]))
