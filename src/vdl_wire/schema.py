"""Declaration types for Kafka messages.

A message is declared once (fields, their types, the versions each field exists in, nullable and
tagged versions, flexible versions) following Apache Kafka's JSON message definitions; the generic
codec in codec.py compiles each declaration per version. Adding a version means editing a
declaration, never writing encode/decode code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; `none` is empty. Parsed from Kafka's "3+", "0-2", "5", "none"."""

    low: int
    high: int  # inclusive; use a large number for "N+"

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high


NO_VERSIONS = Versions(1, 0)
_OPEN_END = 1 << 15


def versions(spec: str | Versions | None) -> Versions:
    """Parse Kafka's version-range notation."""
    if spec is None:
        return NO_VERSIONS
    if isinstance(spec, Versions):
        return spec
    spec = spec.strip()
    if spec == "none":
        return NO_VERSIONS
    if spec.endswith("+"):
        return Versions(int(spec[:-1]), _OPEN_END)
    if "-" in spec:
        low, high = spec.split("-", 1)
        return Versions(int(low), int(high))
    return Versions(int(spec), int(spec))


_parse = versions  # Field's and MessageDecl's parameters shadow the name


# ---- types -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Primitive:
    """A scalar type: int8/16/32/64, uint16/32, float64, bool, string, bytes, records, uuid."""

    name: str

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("int8")
INT16 = Primitive("int16")
UINT16 = Primitive("uint16")
INT32 = Primitive("int32")
UINT32 = Primitive("uint32")
INT64 = Primitive("int64")
FLOAT64 = Primitive("float64")
BOOL = Primitive("bool")
STRING = Primitive("string")
BYTES = Primitive("bytes")
RECORDS = Primitive("records")
UUID = Primitive("uuid")


@dataclass(frozen=True, slots=True)
class Array:
    element: Any  # Primitive | Struct


@dataclass(frozen=True, slots=True)
class Struct:
    """A named group of fields; `name` is Kafka's struct type name (e.g. "TopicProduceData")."""

    name: str
    fields: tuple[Field, ...]


FieldType = Primitive | Array | Struct

# Marker for "no explicit default": the type's natural default (0, "", b"", [], None, ...).
NATURAL = object()


@dataclass(frozen=True, slots=True, init=False)
class Field:
    """One field. `versions` etc. use Kafka's notation ("0+", "3-5", "none"), parsed when the
    field is declared: the stored ranges are always Versions.

    `tag` with `tagged_versions` makes the field a tagged field in those (flexible) versions.
    `flexible_versions="none"` keeps non-compact encoding in flexible versions (RequestHeader's
    client_id).
    """

    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions
    tagged_versions: Versions
    tag: int | None
    default: Any
    flexible_versions: Versions | None  # None = follow the message

    def __init__(self, name: str, type: FieldType, versions: Versions | str = "0+",
                 nullable_versions: Versions | str | None = None, tagged_versions: Versions | str | None = None,
                 tag: int | None = None, default: Any = NATURAL,
                 flexible_versions: Versions | str | None = None) -> None:
        tagged = _parse(tagged_versions)
        if (tag is None) != tagged.empty:
            raise ValueError(f"field {name}: tag and tagged_versions go together")
        for attribute, value in (("name", name), ("type", type), ("versions", _parse(versions)),
                                 ("nullable_versions", _parse(nullable_versions)), ("tagged_versions", tagged),
                                 ("tag", tag), ("default", default),
                                 ("flexible_versions", None if flexible_versions is None
                                  else _parse(flexible_versions))):
            object.__setattr__(self, attribute, value)

    @property
    def tagged_tag(self) -> int:
        """The tag of a field declared tagged (one with tagged versions always has one)."""
        if self.tag is None:
            raise ValueError(f"field {self.name} is not tagged")
        return self.tag


def struct(name: str, *fields: Field) -> Struct:
    return Struct(name, tuple(fields))


@dataclass(frozen=True, slots=True, init=False)
class MessageDecl:
    """A request or response declaration: Kafka's top-level JSON message definition."""

    name: str  # e.g. "ProduceRequest"
    api_key: int
    valid_versions: Versions
    flexible_versions: Versions
    fields: tuple[Field, ...]

    def __init__(self, name: str, api_key: int, valid_versions: Versions | str, flexible_versions: Versions | str,
                 fields: tuple[Field, ...] = ()) -> None:
        for attribute, value in (("name", name), ("api_key", api_key), ("valid_versions", _parse(valid_versions)),
                                 ("flexible_versions", _parse(flexible_versions)), ("fields", fields)):
            object.__setattr__(self, attribute, value)

    @property
    def root(self) -> Struct:
        return Struct(self.name, self.fields)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions


def message(name: str, api_key: int, valid: str, flexible: str, *fields: Field) -> MessageDecl:
    return MessageDecl(name, api_key, valid, flexible, tuple(fields))
