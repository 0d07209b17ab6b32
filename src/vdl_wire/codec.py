"""The generic encoder/decoder: walks declarations from schema.py.

`build_message(decl)` generates a slots dataclass per struct of the declaration (nested struct
classes are attributes of the message class, under Kafka's struct type names) and compiles, once
at import time, a decoder and an encoder per valid version. A compiled decoder is straight-line
code generated from the declaration (runs of fixed-width fields read with one unpack, other
fields through precompiled reader closures), with no version checks left at decode time.

Encoders return a list of buffers: small fields are packed into bytearrays, while `records`
values (bytes, memoryview or a list of buffers) larger than INLINE_RECORDS_BYTES are passed
through untouched, so stored batches reach the socket without being copied.
"""

from __future__ import annotations

import dataclasses
import operator
import struct
import uuid as uuid_mod
from collections.abc import Callable
from typing import Any, Protocol, cast

from . import primitives as p
from .errors import DecodeError
from .schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    NATURAL,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    FieldType,
    MessageDecl,
    Primitive,
    Struct,
    Versions,
)

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, "Sink"], None]
# Readers and writers compiled so far for one version, by ("dec" | "enc", struct name).
_Compiled = dict[tuple[str, str], Callable[..., Any]]

_FIXED_READERS: dict[Primitive, Reader] = {
    INT8: p.read_int8,
    INT16: p.read_int16,
    UINT16: p.read_uint16,
    INT32: p.read_int32,
    UINT32: p.read_uint32,
    INT64: p.read_int64,
    FLOAT64: p.read_float64,
    BOOL: p.read_bool,
    UUID: p.read_uuid,
}
_FIXED_PACK: dict[Primitive, Callable[[Any], bytes]] = {
    INT8: p.pack_i8,
    INT16: p.pack_i16,
    UINT16: p.pack_u16,
    INT32: p.pack_i32,
    UINT32: p.pack_u32,
    INT64: p.pack_i64,
    FLOAT64: p.pack_f64,
}
# struct module codes for fixed-width types merged into one unpack (bool: nonzero is true).
_STRUCT_CODES: dict[FieldType, str] = {
    INT8: "b",
    INT16: "h",
    UINT16: "H",
    INT32: "i",
    UINT32: "I",
    INT64: "q",
    FLOAT64: "d",
    BOOL: "?",
}
_FIXED_SIZE = {INT8: 1, INT16: 2, UINT16: 2, INT32: 4, UINT32: 4, INT64: 8, FLOAT64: 8, BOOL: 1, UUID: 16}
_ZERO_UUID = uuid_mod.UUID(int=0)
# Records values up to this size are copied into the output; larger ones are passed through.
INLINE_RECORDS_BYTES = 512


class Sink:
    """Encoder output: a growing bytearray plus already-finished parts (records passthrough)."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[p.Buffer] = []

    def passthrough(self, buffers: list[p.Buffer]) -> None:
        """Append caller buffers without copying them."""
        if self.buf:
            self.parts.append(self.buf)
            self.buf = bytearray()
        self.parts.extend(b for b in buffers if len(b))

    def finish(self) -> list[p.Buffer]:
        if self.buf or not self.parts:
            self.parts.append(self.buf)
        self.buf = bytearray()
        return self.parts


# ---- defaults and generated classes ------------------------------------------------------------


def _natural_default(ftype: Any) -> Any:
    if isinstance(ftype, Primitive):
        if ftype in (BOOL,):
            return False
        if ftype is FLOAT64:
            return 0.0
        if ftype is STRING:
            return ""
        if ftype is BYTES:
            return b""
        if ftype is RECORDS:
            return None
        if ftype is UUID:
            return _ZERO_UUID
        return 0
    raise AssertionError("arrays and structs use factories")


def _default_spec(f: Field, classes: dict[str, type]) -> tuple[bool, Any]:
    """(is_factory, value_or_factory) for a field's default."""
    if isinstance(f.type, Array):
        if f.default is None:
            return False, None
        return True, list
    if isinstance(f.type, Struct):
        if f.default is None:
            return False, None
        return True, classes[f.type.name]
    if f.default is NATURAL:
        return False, _natural_default(f.type)
    return False, f.default


def _annotation(ftype: Any) -> str:
    if isinstance(ftype, Array):
        return f"list[{_annotation(ftype.element)}]"
    if isinstance(ftype, Struct):
        return ftype.name
    return {
        "string": "str",
        "bytes": "bytes",
        "records": "bytes | memoryview | list | None",
        "uuid": "uuid.UUID",
        "bool": "bool",
        "float64": "float",
    }.get(ftype.name, "int")


def _struct_repr(self: Any) -> str:
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
    return f"{type(self).__qualname__}({fields})"


def _struct_eq(self: Any, other: Any) -> object:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)


def _build_classes(root: Struct, classes: dict[str, type]) -> type:
    """Depth-first: generate a slots dataclass per struct, children before parents."""
    for f in root.fields:
        inner = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(inner, Struct) and inner.name not in classes:
            _build_classes(inner, classes)
    specs = []
    for f in root.fields:
        is_factory, value = _default_spec(f, classes)
        dflt = dataclasses.field(default_factory=value) if is_factory else dataclasses.field(default=value)
        specs.append((f.name, _annotation(f.type), dflt))
    # Every broker, client and Spark worker builds these ~280 classes at import: the shared
    # __repr__/__eq__ below and a docstring given up front (dataclass derives one from the
    # signature otherwise) halve what dataclass spends generating them.
    namespace = {"__doc__": f"Kafka struct {root.name}: " + ", ".join(f.name for f in root.fields),
                 "__repr__": _struct_repr, "__eq__": _struct_eq, "__hash__": None}
    cls = dataclasses.make_dataclass(root.name, specs, namespace=namespace, slots=True, eq=False, repr=False)
    cls.__module__ = __name__
    for f in root.fields:
        inner = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(inner, Struct):
            setattr(cls, inner.name, classes[inner.name])
    classes[root.name] = cls
    return cls


# ---- compilation -------------------------------------------------------------------------------


class _Ctx:
    """Compilation context for one (message, version)."""

    def __init__(self, version: int, flexible: bool, classes: dict[str, type]) -> None:
        self.version = version
        self.flexible = flexible
        self.classes = classes

    def compact(self, f: Field) -> bool:
        if not self.flexible:
            return False
        fv = f.flexible_versions
        return fv is None or self.version in fv

    def nullable(self, f: Field) -> bool:
        return self.version in f.nullable_versions


def _min_size(ftype: Any, ctx: _Ctx, compact: bool) -> int:
    if isinstance(ftype, Primitive):
        if ftype in _FIXED_SIZE:
            return _FIXED_SIZE[ftype]
        if ftype is STRING:
            return 1 if compact else 2
        return 1 if compact else 4
    if isinstance(ftype, Array):
        return 1 if compact else 4
    size = 1 if ctx.flexible else 0  # tag buffer
    for f in ftype.fields:
        if ctx.version in f.versions and ctx.version not in f.tagged_versions:
            size += _min_size(f.type, ctx, ctx.compact(f))
    return size


def _scalar_reader(ftype: Primitive, compact: bool, nullable: bool) -> Reader:
    if ftype in _FIXED_READERS:
        return _FIXED_READERS[ftype]
    return p.length_prefixed_reader(ftype.name, compact, nullable)


def _array_reader(elem: Reader, min_size: int, compact: bool, nullable: bool, name: str) -> Reader:
    read_uvarint = p.read_uvarint
    read_int32 = p.read_int32

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        start = pos
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n, pos = read_int32(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid array length {n} for {name}", start)
        # Check against the bytes left BEFORE allocating: a hostile count cannot allocate more
        # than the input holds.
        if n * min_size > len(buf) - pos:
            raise DecodeError(f"array {name} declares {n} elements, only {len(buf) - pos} bytes left", start)
        out: list[Any] = []
        append = out.append
        for _ in range(n):
            value, pos = elem(buf, pos)
            append(value)
        return out, pos

    return read


def _fixed_array_reader(code: str, size: int, compact: bool, nullable: bool, name: str) -> Reader:
    """Array of fixed-width numbers (e.g. replica_nodes): one unpack for the whole array."""
    read_uvarint = p.read_uvarint
    read_int32 = p.read_int32
    unpack_from = struct.unpack_from

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        start = pos
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n, pos = read_int32(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid array length {n} for {name}", start)
        end = pos + n * size
        if end > len(buf):
            raise DecodeError(f"array {name} declares {n} elements, only {len(buf) - pos} bytes left", start)
        return list(unpack_from(f">{n}{code}", buf, pos)), end

    return read


def _field_reader(f: Field, ftype: Any, ctx: _Ctx, compiled: _Compiled) -> Reader:
    compact = ctx.compact(f)
    nullable = ctx.nullable(f)
    if isinstance(ftype, Array):
        elem = ftype.element
        if isinstance(elem, Struct):
            elem_reader = _compile_struct_decoder(elem, ctx, compiled)
            size = max(1, _min_size(elem, ctx, compact))
        elif elem in _STRUCT_CODES:
            return _fixed_array_reader(_STRUCT_CODES[elem], _FIXED_SIZE[elem], compact, nullable, f.name)
        else:
            elem_reader = _scalar_reader(elem, compact, False)
            size = max(1, _min_size(elem, ctx, compact))
        return _array_reader(elem_reader, size, compact, nullable, f.name)
    if isinstance(ftype, Struct):
        inner = _compile_struct_decoder(ftype, ctx, compiled)
        if not nullable:
            return inner

        def read_nullable_struct(buf: memoryview, pos: int) -> tuple[Any, int]:
            marker, pos = p.read_int8(buf, pos)
            if marker < 0:
                return None, pos
            return inner(buf, pos)

        return read_nullable_struct
    return _scalar_reader(ftype, compact, nullable)


def _tag_reader(tagged: dict[int, tuple[Reader, str]]
                ) -> Callable[[memoryview, int], tuple[dict[int, Any], int]]:
    """Reads a tag buffer -> ({tag: value} for known tags, new position); unknown tags are skipped."""
    read_uvarint = p.read_uvarint

    def read_tags(buf: memoryview, pos: int) -> tuple[dict[int, Any], int]:
        start = pos
        count, pos = read_uvarint(buf, pos)
        if count * 2 > len(buf) - pos:
            raise DecodeError(f"{count} tagged fields declared, only {len(buf) - pos} bytes left", start)
        found = {}
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise p.truncated("tagged field", pos, size, len(buf) - pos)
            known = tagged.get(tag)
            if known is not None:
                reader, name = known
                # Bound the reader by the tagged field's own size; positions stay absolute.
                found[tag], used = reader(buf[:end], pos)
                if used != end:
                    raise DecodeError(f"tagged field {name} size {size} but {used - pos} bytes used", pos)
            pos = end
        return found, pos

    return read_tags


def _compile_struct_decoder(st: Struct, ctx: _Ctx, compiled: _Compiled) -> Reader:
    """Generate straight-line decode code for `st` at ctx.version.

    Variables are slot numbers (field names appear only as repr'd strings in error messages):
    consecutive fixed-width fields become one struct.unpack_from after one bounds
    check; other fields call their precompiled reader; absent fields get their default.
    """
    key = ("dec", st.name)
    if key in compiled:
        return compiled[key]
    env: dict[str, Any] = {"cls": ctx.classes[st.name], "truncated": p.truncated}
    body: list[str] = []
    args: list[str] = []
    run: list[tuple[int, Field]] = []
    tagged: dict[int, tuple[Reader, str]] = {}
    tag_slots: list[tuple[int, int]] = []

    def flush_run() -> None:
        if not run:
            return
        fmt = ">" + "".join(_STRUCT_CODES[f.type] for _, f in run)
        size = struct.calcsize(fmt)
        k = run[0][0]
        env[f"u{k}"] = struct.Struct(fmt).unpack_from
        names = "/".join(f.name for _, f in run)
        targets = "".join(f"v{i}, " for i, _ in run)
        body.append(
            f"    if pos + {size} > len(buf): raise truncated({names!r}, pos, {size}, len(buf) - pos)"
        )
        body.append(f"    {targets}= u{k}(buf, pos)")
        body.append(f"    pos += {size}")
        run.clear()

    for i, f in enumerate(st.fields):
        is_factory, default = _default_spec(f, ctx.classes)
        env[f"d{i}"] = default
        default_expr = f"d{i}()" if is_factory else f"d{i}"
        if ctx.version not in f.versions:
            args.append(default_expr)
            continue
        args.append(f"v{i}")
        if ctx.flexible and ctx.version in f.tagged_versions:
            tag = f.tagged_tag
            tagged[tag] = (_field_reader(f, f.type, ctx, compiled), f.name)
            tag_slots.append((i, tag))
            continue
        if f.type in _STRUCT_CODES and not ctx.nullable(f):
            run.append((i, f))
            continue
        flush_run()
        env[f"r{i}"] = _field_reader(f, f.type, ctx, compiled)
        body.append(f"    v{i}, pos = r{i}(buf, pos)")
    flush_run()
    if ctx.flexible:
        env["read_tags"] = _tag_reader(tagged)
        body.append("    tags, pos = read_tags(buf, pos)")
        for i, tag in tag_slots:
            is_factory, _ = _default_spec(st.fields[i], ctx.classes)
            default_expr = f"d{i}()" if is_factory else f"d{i}"
            body.append(f"    v{i} = tags[{tag}] if {tag} in tags else {default_expr}")
    body.append(f"    return cls({', '.join(args)}), pos")
    source = "def decode(buf, pos):\n" + "\n".join(body) + "\n"
    # The source comes from our declarations only, never from input.
    exec(compile(source, f"<decode {st.name} v{ctx.version}>", "exec"), env)
    decoder = env["decode"]
    decoder.source = source
    compiled[key] = decoder
    decode: Reader = decoder
    return decode


# ---- encoders ----------------------------------------------------------------------------------


def _scalar_writer(ftype: Primitive, compact: bool, nullable: bool, name: str) -> Writer:
    if ftype in _FIXED_PACK:
        pack = _FIXED_PACK[ftype]

        def write_fixed(value: Any, sink: Sink) -> None:
            sink.buf += pack(value)

        return write_fixed
    if ftype is BOOL:

        def write_bool(value: Any, sink: Sink) -> None:
            sink.buf.append(1 if value else 0)

        return write_bool
    if ftype is UUID:

        def write_uuid(value: Any, sink: Sink) -> None:
            sink.buf += value.bytes

        return write_uuid
    if ftype is STRING:

        def write_str(value: Any, sink: Sink) -> None:
            p.write_string(sink.buf, value, compact=compact, nullable=nullable)

        return write_str
    if ftype is BYTES:

        def write_b(value: Any, sink: Sink) -> None:
            p.write_bytes(sink.buf, value, compact=compact, nullable=nullable)

        return write_b

    def write_records(value: Any, sink: Sink) -> None:
        if value is None:
            if not nullable:
                raise ValueError(f"null for non-nullable records field {name}")
            p.write_length(sink.buf, -1, compact, False)
            return
        buffers = [value] if isinstance(value, bytes | bytearray | memoryview) else list(value)
        size = p.buffer_size(buffers)
        p.write_length(sink.buf, size, compact, False)
        if size <= INLINE_RECORDS_BYTES:
            for b in buffers:  # tiny: copying is cheaper than another buffer in the output list
                sink.buf += b
        else:
            sink.passthrough(buffers)

    return write_records


def _field_writer(f: Field, ftype: Any, ctx: _Ctx, compiled: _Compiled) -> Writer:
    compact = ctx.compact(f)
    nullable = ctx.nullable(f)
    if isinstance(ftype, Array):
        elem = ftype.element
        if isinstance(elem, Struct):
            elem_writer = _compile_struct_encoder(elem, ctx, compiled)
        else:
            elem_writer = _scalar_writer(elem, compact, False, f.name)
        write_uvarint = p.write_uvarint
        pack_i32 = p.pack_i32

        def write_array(value: Any, sink: Sink) -> None:
            if value is None:
                if not nullable:
                    raise ValueError(f"null for non-nullable array {f.name}")
                if compact:
                    sink.buf.append(0)
                else:
                    sink.buf += pack_i32(-1)
                return
            if compact:
                write_uvarint(sink.buf, len(value) + 1)
            else:
                sink.buf += pack_i32(len(value))
            for item in value:
                elem_writer(item, sink)

        return write_array
    if isinstance(ftype, Struct):
        inner = _compile_struct_encoder(ftype, ctx, compiled)
        if not nullable:
            return inner

        def write_nullable_struct(value: Any, sink: Sink) -> None:
            if value is None:
                sink.buf += b"\xff"
                return
            sink.buf.append(1)
            inner(value, sink)

        return write_nullable_struct
    return _scalar_writer(ftype, compact, nullable, f.name)


def _run_writer(names: list[str], fmt: str) -> Writer:
    """Consecutive fixed-width fields packed with one struct.pack call."""
    pack = struct.Struct(fmt).pack
    if len(names) == 1:
        name = names[0]

        def write_one(value: Any, sink: Sink) -> None:
            sink.buf += pack(getattr(value, name))

        return write_one
    getter = operator.attrgetter(*names)

    def write_run(value: Any, sink: Sink) -> None:
        sink.buf += pack(*getter(value))

    return write_run


def _attr_writer(name: str, writer: Writer) -> Writer:
    def write_attr(value: Any, sink: Sink) -> None:
        writer(getattr(value, name), sink)

    return write_attr


def _compile_struct_encoder(st: Struct, ctx: _Ctx, compiled: _Compiled) -> Writer:
    key = ("enc", st.name)
    if key in compiled:
        return compiled[key]
    steps: list[Writer] = []
    run: list[Field] = []
    tagged: list[tuple[int, str, Writer, Any]] = []

    def flush_run() -> None:
        if run:
            steps.append(
                _run_writer([f.name for f in run], ">" + "".join(_STRUCT_CODES[f.type] for f in run))
            )
            run.clear()

    for f in st.fields:
        if ctx.version not in f.versions:
            continue
        if ctx.flexible and ctx.version in f.tagged_versions:
            is_factory, value = _default_spec(f, ctx.classes)
            default = value() if is_factory else value
            tagged.append((f.tagged_tag, f.name, _field_writer(f, f.type, ctx, compiled), default))
        elif f.type in _STRUCT_CODES and not ctx.nullable(f):
            run.append(f)
        else:
            flush_run()
            steps.append(_attr_writer(f.name, _field_writer(f, f.type, ctx, compiled)))
    flush_run()
    tagged.sort(key=lambda t: t[0])
    steps_t = tuple(steps)
    tagged_t = tuple(tagged)
    flexible = ctx.flexible
    write_uvarint = p.write_uvarint

    def encode(value: Any, sink: Sink) -> None:
        for step in steps_t:
            step(value, sink)
        if not flexible:
            return
        # Kafka writes a tagged field only when it differs from its default.
        present = []
        for tag, name, writer, default in tagged_t:
            v = getattr(value, name)
            if v != default:
                sub = Sink()
                writer(v, sub)
                present.append((tag, b"".join(sub.finish())))
        write_uvarint(sink.buf, len(present))
        for tag, data in present:
            write_uvarint(sink.buf, tag)
            write_uvarint(sink.buf, len(data))
            sink.buf += data

    compiled[key] = encode
    return encode


# ---- messages ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class CompiledVersion:
    version: int
    flexible: bool
    decode: Reader
    encode: Writer


class _VersionCodecs(dict[int, CompiledVersion]):
    """version -> CompiledVersion, each valid version compiled when first used.

    Compiling every version of every API at import took most of the import's time (about 0.4 s
    of CPU), paid by every process that imports the wire layer: each broker and client, and each
    of Spark's Python workers that loads the connector, most of which use a handful of versions.
    Two threads compiling the same version at once each build an equal codec; either is kept."""

    def __init__(self, decl: MessageDecl, classes: dict[str, type]) -> None:
        super().__init__()
        self._decl = decl
        self._classes = classes

    def __missing__(self, version: int) -> CompiledVersion:
        valid = self._decl.valid_versions
        if not valid.low <= version <= valid.high:
            raise KeyError(version)
        flexible = self._decl.is_flexible(version)
        ctx = _Ctx(version, flexible, self._classes)
        compiled: _Compiled = {}
        codec = CompiledVersion(
            version,
            flexible,
            _compile_struct_decoder(self._decl.root, ctx, compiled),
            _compile_struct_encoder(self._decl.root, ctx, compiled),
        )
        self[version] = codec
        return codec


def build_message(decl: MessageDecl, module: str | None = None) -> type:
    """Generate the value classes for `decl`; each valid version compiles when first used.

    The returned class carries `DECL` (the declaration), `API_KEY`, `VERSIONS` (the valid range)
    and `CODECS` (version -> CompiledVersion, compiled on first use); nested struct classes are attributes under Kafka's
    struct type names, reachable from the message class itself (e.g. ProduceRequest.TopicProduceData).
    Pass `module=__name__` from the module that binds the class under decl.name, for pickling.
    """
    classes: dict[str, type] = {}
    cls = _build_classes(decl.root, classes)
    for name, sub in classes.items():
        if module is not None:
            # Importable names (pickle, repr): module.ProduceRequest.TopicProduceData
            sub.__module__ = module
            sub.__qualname__ = name if sub is cls else f"{decl.name}.{name}"
        if sub is not cls:
            setattr(cls, name, sub)
    valid: Versions = decl.valid_versions
    codecs = _VersionCodecs(decl, classes)
    for attribute, value in (("DECL", decl), ("API_KEY", decl.api_key), ("VERSIONS", valid), ("CODECS", codecs)):
        setattr(cls, attribute, value)
    return cls


class MessageClass(Protocol):
    """What build_message adds to a message class."""

    DECL: MessageDecl
    API_KEY: int
    VERSIONS: Versions
    CODECS: dict[int, CompiledVersion]


def message_class(cls: type) -> MessageClass:
    """`cls` (a class build_message made) as what build_message made it."""
    # A checker sees `type` where a message class is chosen at run time (by API key, say).
    return cast(MessageClass, cls)


def _codec(cls: type, version: int) -> CompiledVersion:
    try:
        return message_class(cls).CODECS[version]
    except KeyError:
        raise ValueError(f"{cls.__name__} has no version {version}") from None


def decode_message(
    cls: type, version: int, data: p.Buffer, pos: int = 0, *, exact: bool = False
) -> tuple[Any, int]:
    """Decode one `cls` value at `version` from `data[pos:]`; returns (value, end position).

    With exact=True, bytes left over after the value are a DecodeError.
    """
    buf = data if isinstance(data, memoryview) else memoryview(data)
    value, end = _codec(cls, version).decode(buf, pos)
    if exact and end != len(buf):
        raise DecodeError(f"{len(buf) - end} unexpected trailing bytes after {cls.__name__} v{version}", end)
    return value, end


def encode_into(cls: type, version: int, value: Any, sink: Sink) -> None:
    try:
        _codec(cls, version).encode(value, sink)
    except (TypeError, AttributeError, OverflowError, struct.error) as exc:
        raise ValueError(f"cannot encode {cls.__name__} v{version}: {exc}") from exc


def encode_message(cls: type, version: int, value: Any) -> list[p.Buffer]:
    """Encode `value` (an instance of `cls`) at `version` into a list of buffers."""
    sink = Sink()
    encode_into(cls, version, value, sink)
    return sink.finish()
