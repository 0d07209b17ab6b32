"""Hypothesis strategies derived from the message declarations themselves.

`value_strategy(cls, version)` walks cls.DECL: a field present at `version` gets a strategy for its
type (None allowed where the field is nullable at that version); an absent field keeps its
default, which is what the decoder yields for it. Also `sample_value(cls, version)`: one
deterministic, fully populated value (arrays of 2, non-empty strings) for truncation tests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from vdl_wire.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    Primitive,
    Struct,
)

_INT_BOUNDS = {
    INT8: (-(2**7), 2**7 - 1),
    INT16: (-(2**15), 2**15 - 1),
    UINT16: (0, 2**16 - 1),
    INT32: (-(2**31), 2**31 - 1),
    UINT32: (0, 2**32 - 1),
    INT64: (-(2**63), 2**63 - 1),
}
_MAX_LIST = 3


def _primitive(ftype: Primitive) -> st.SearchStrategy:
    if ftype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[ftype]
        return st.integers(lo, hi)
    if ftype is BOOL:
        return st.booleans()
    if ftype is FLOAT64:
        return st.floats(allow_nan=False)
    if ftype is STRING:
        return st.text(max_size=12)
    if ftype in (BYTES, RECORDS):
        return st.binary(max_size=24)
    if ftype is UUID:
        return st.uuids()
    raise AssertionError(ftype)


def _type_strategy(ftype: Any, classes: dict[str, type], version: int) -> st.SearchStrategy:
    if isinstance(ftype, Array):
        return st.lists(_type_strategy(ftype.element, classes, version), max_size=_MAX_LIST)
    if isinstance(ftype, Struct):
        return _struct_strategy(ftype, classes, version)
    return _primitive(ftype)


def _field_strategy(f: Field, classes: dict[str, type], version: int) -> st.SearchStrategy:
    base = _type_strategy(f.type, classes, version)
    if version in f.nullable_versions:
        return st.none() | base
    return base


def _struct_strategy(s: Struct, classes: dict[str, type], version: int) -> st.SearchStrategy:
    kwargs = {f.name: _field_strategy(f, classes, version) for f in s.fields if version in f.versions}
    return st.builds(classes[s.name], **kwargs)


def struct_classes(cls: type) -> dict[str, type]:
    """Kafka struct name -> generated class, for a message class and all its nested structs."""
    out = {cls.DECL.name: cls}
    for name in dir(cls):
        attr = getattr(cls, name)
        if isinstance(attr, type) and name[:1].isupper() and hasattr(attr, "__dataclass_fields__"):
            out[name] = attr
    return out


def value_strategy(cls: type, version: int) -> st.SearchStrategy:
    return _struct_strategy(cls.DECL.root, struct_classes(cls), version)


def _sample(ftype: Any, classes: dict[str, type], version: int, seed: int) -> Any:
    if isinstance(ftype, Array):
        return [_sample(ftype.element, classes, version, seed + i) for i in range(2)]
    if isinstance(ftype, Struct):
        return _sample_struct(ftype, classes, version, seed)
    if ftype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[ftype]
        return max(lo, min(hi, seed + 1))
    if ftype is BOOL:
        return True
    if ftype is FLOAT64:
        return seed + 0.5
    if ftype is STRING:
        return f"s{seed}x"
    if ftype in (BYTES, RECORDS):
        return bytes(range(seed % 7, seed % 7 + 5))
    import uuid

    return uuid.UUID(int=seed + 1)


def _sample_struct(s: Struct, classes: dict[str, type], version: int, seed: int) -> Any:
    kwargs = {
        f.name: _sample(f.type, classes, version, seed + i)
        for i, f in enumerate(s.fields)
        if version in f.versions
    }
    return classes[s.name](**kwargs)


def sample_value(cls: type, version: int) -> Any:
    return _sample_struct(cls.DECL.root, struct_classes(cls), version, 0)


def all_message_versions() -> list[tuple[type, int]]:
    from vdl_wire.messages import MESSAGE_PAIRS

    out = []
    for pair in MESSAGE_PAIRS:
        for cls in pair:
            for v in range(cls.VERSIONS.low, cls.VERSIONS.high + 1):
                out.append((cls, v))
    return out
