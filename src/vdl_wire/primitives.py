"""Kafka wire primitives: bounds-checked readers and appending writers.

# Kafka protocol guide: "Protocol Primitive Types".
Readers take (buf: memoryview, pos) and return (value, new_pos); they check every length against
the bytes left BEFORE slicing or allocating and raise DecodeError, never IndexError/struct.error.
Writers append to a bytearray.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .errors import DecodeError

Buffer = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

unpack_i8 = _I8.unpack_from
unpack_i16 = _I16.unpack_from
unpack_u16 = _U16.unpack_from
unpack_i32 = _I32.unpack_from
unpack_u32 = _U32.unpack_from
unpack_i64 = _I64.unpack_from
unpack_f64 = _F64.unpack_from
pack_i8 = _I8.pack
pack_i16 = _I16.pack
pack_u16 = _U16.pack
pack_i32 = _I32.pack
pack_u32 = _U32.pack
pack_i64 = _I64.pack
pack_f64 = _F64.pack
pack_into_i32 = _I32.pack_into


def truncated(what: str, pos: int, need: int, have: int) -> DecodeError:
    return DecodeError(f"truncated {what}: need {need} bytes, {max(have, 0)} left", pos)


def _fixed_reader(unpack: Callable[[Buffer, int], tuple[Any, ...]], size: int,
                  what: str) -> Callable[[memoryview, int], tuple[Any, int]]:
    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            raise truncated(what, pos, size, len(buf) - pos)
        return unpack(buf, pos)[0], end

    read.__name__ = f"read_{what}"
    return read


read_int8 = _fixed_reader(unpack_i8, 1, "int8")
read_int16 = _fixed_reader(unpack_i16, 2, "int16")
read_uint16 = _fixed_reader(unpack_u16, 2, "uint16")
read_int32 = _fixed_reader(unpack_i32, 4, "int32")
read_uint32 = _fixed_reader(unpack_u32, 4, "uint32")
read_int64 = _fixed_reader(unpack_i64, 8, "int64")
read_float64 = _fixed_reader(unpack_f64, 8, "float64")


def read_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise truncated("bool", pos, 1, 0)
    return buf[pos] != 0, pos + 1


def read_uvarint(buf: memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128 varint (Kafka UNSIGNED_VARINT); at most `max_bytes` bytes (5 for 32 bits)."""
    n = len(buf)
    if pos < n:
        b = buf[pos]
        if b < 0x80:  # fast path: one byte
            return b, pos + 1
    start = pos
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= n:
            raise truncated("varint", start, pos - start + 1, 0)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes", start)


def read_uvarlong(buf: memoryview, pos: int) -> tuple[int, int]:
    return read_uvarint(buf, pos, 10)


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (Kafka VARINT, used inside record batches)."""
    raw, pos = read_uvarint(buf, pos, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed varlong (Kafka VARLONG)."""
    raw, pos = read_uvarint(buf, pos, 10)
    return (raw >> 1) ^ -(raw & 1), pos


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise truncated("uuid", pos, 16, len(buf) - pos)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _utf8(buf: memoryview, pos: int, end: int) -> str:
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string is not valid UTF-8: {exc.reason}", pos + exc.start) from None


def length_prefixed_reader(kind: str, compact: bool,
                           nullable: bool) -> Callable[[memoryview, int], tuple[Any, int]]:
    """A specialised reader for a string / bytes / records field (classic or compact, nullable
    or not). Strings decode UTF-8; bytes copy; records are zero-copy memoryview slices."""
    short = kind == "string" and not compact
    width = 2 if short else 4
    unpack = unpack_i16 if short else unpack_i32

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        start = pos
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            pos += width
            if pos > len(buf):
                raise truncated(f"{kind} length", start, width, len(buf) - start)
            n = unpack(buf, start)[0]
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid {kind} length {n}", start)
        end = pos + n
        if end > len(buf):
            raise truncated(kind, pos, n, len(buf) - pos)
        if kind == "records":
            return buf[pos:end], end
        if kind == "bytes":
            return bytes(buf[pos:end]), end
        return _utf8(buf, pos, end), end

    return read


_READERS = {
    (kind, compact, nullable): length_prefixed_reader(kind, compact, nullable)
    for kind in ("string", "bytes", "records")
    for compact in (False, True)
    for nullable in (False, True)
}


def read_string(buf: memoryview, pos: int, *, compact: bool = False,
                nullable: bool = False) -> tuple[Any, int]:
    return _READERS["string", compact, nullable](buf, pos)


def read_bytes(buf: memoryview, pos: int, *, compact: bool = False,
               nullable: bool = False) -> tuple[Any, int]:
    return _READERS["bytes", compact, nullable](buf, pos)


def read_records(buf: memoryview, pos: int, *, compact: bool = False,
                 nullable: bool = True) -> tuple[Any, int]:
    """A records field: a zero-copy memoryview slice of the input (or None)."""
    return _READERS["records", compact, nullable](buf, pos)


# ---- writers -----------------------------------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Zig-zag signed 32-bit varint."""
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Zig-zag signed 64-bit varlong."""
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_length(out: bytearray, n: int, compact: bool, short: bool) -> None:
    """Length prefix; n == -1 is null. `short` selects int16 (classic strings)."""
    if compact:
        write_uvarint(out, n + 1)
    elif short:
        out += pack_i16(n)
    else:
        out += pack_i32(n)


def write_string(out: bytearray, value: str | None, *, compact: bool = False, nullable: bool = False) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null for a non-nullable string")
        write_length(out, -1, compact, True)
        return
    data = value.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    write_length(out, len(data), compact, True)
    out += data


def write_bytes(
    out: bytearray, value: Buffer | None, *, compact: bool = False, nullable: bool = False
) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null for non-nullable bytes")
        write_length(out, -1, compact, False)
        return
    n = value.nbytes if isinstance(value, memoryview) else len(value)
    write_length(out, n, compact, False)
    out += value


def buffer_size(buffers: list[Buffer]) -> int:
    return sum(b.nbytes if isinstance(b, memoryview) else len(b) for b in buffers)
