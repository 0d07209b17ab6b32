"""Zig-zag varint/varlong helpers for records. # Kafka protocol guide: Record (varint = protobuf zig-zag)"""

from __future__ import annotations

from vdl_wire.errors import DecodeError

Buffer = bytes | bytearray | memoryview


def read_varint(buf: Buffer, position: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a zig-zag varint at `position` (not reading at or past `end`); returns (value, next)."""
    raw = 0
    shift = 0
    start = position
    while True:
        if position >= end:
            raise DecodeError("truncated varint", start)
        byte = buf[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
        if position - start >= max_bytes:
            raise DecodeError("varint too long", start)


def read_varlong(buf: Buffer, position: int, end: int) -> tuple[int, int]:
    return read_varint(buf, position, end, 10)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag varint encoding of a signed 64-bit value."""
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def varint_size(value: int) -> int:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size
