"""The error a response carries, for metrics: its top-level error code, else the first non-zero
error code of its parts (a Produce answering NOT_LEADER_OR_FOLLOWER for one partition is a
request that failed with NOT_LEADER_OR_FOLLOWER).

The places where a response keeps error codes are read once per response class from its
declaration (fields named `error_code`, at any depth of arrays and structs), so this knows no
API by name.
"""

from __future__ import annotations

from typing import Any

from vdl_wire.schema import Array, Field, Struct

Path = tuple[str, ...]

_PATHS: dict[type, tuple[Path, ...]] = {}


def _error_paths(fields: tuple[Field, ...], prefix: Path) -> list[Path]:
    """Paths to every `error_code` under `fields`, shallowest first."""
    here = [(*prefix, f.name) for f in fields if f.name == "error_code"]
    deeper: list[Path] = []
    for f in fields:
        inner = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(inner, Struct):
            deeper += _error_paths(inner.fields, (*prefix, f.name))
    return here + deeper


def error_paths(response_class: type) -> tuple[Path, ...]:
    paths = _PATHS.get(response_class)
    if paths is None:
        decl = getattr(response_class, "DECL", None)
        paths = tuple(_error_paths(decl.fields, ())) if decl is not None else ()
        _PATHS[response_class] = paths
    return paths


def _first(value: Any, path: Path) -> int:
    name, rest = path[0], path[1:]
    item = getattr(value, name, None)
    if not rest:
        return item if isinstance(item, int) else 0
    for element in item if isinstance(item, list) else (item,):
        if element is not None and (code := _first(element, rest)):
            return code
    return 0


def response_error(response: Any) -> int:
    """The first non-zero error code of `response` (0 when none, or for no response)."""
    if response is None:
        return 0
    for path in error_paths(type(response)):
        if code := _first(response, path):
            return code
    return 0
