"""MessageSet v0 and v1 (magic 0/1), including compressed wrapper messages.

# Kafka protocol guide: Message Sets
Entry: offset int64, message_size int32, then the message: crc uint32 (CRC32 of magic..end),
magic int8, attributes int8, [timestamp int64 if magic 1], key bytes, value bytes (int32 length,
-1 = null). A compressed wrapper's value is a compressed inner message set. Inner offsets: magic 1
wrappers carry relative inner offsets and the wrapper's offset is the absolute offset of the last
inner message (KIP-31); magic 0 inner offsets are absolute.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from vdl_wire.errors import DecodeError
from vdl_wire.records.compression import (
    DEFAULT_MAX_OUTPUT_BYTES,
    Compression,
    _xxh32,
    compress,
    decompress,
)

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12
_ENTRY = struct.Struct(">qi")
_MESSAGE_V0 = struct.Struct(">Ibb")
_TIMESTAMP = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_MIN_MESSAGE_SIZE = {0: 4 + 1 + 1 + 4 + 4, 1: 4 + 1 + 1 + 8 + 4 + 4}
_TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1


@dataclass(slots=True)
class LegacyRecord:
    """One (inner) message of a magic 0/1 message set, with its absolute offset."""

    offset: int
    timestamp: int  # -1 for magic 0
    key: bytes | None
    value: bytes | None
    magic: int
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime (magic 1 only)


@dataclass(slots=True)
class MessageSetEntry:
    """One top-level entry: a plain message (records has one item) or a compressed wrapper."""

    offset: int
    magic: int
    compression: int
    timestamp: int
    timestamp_type: int
    records: list[LegacyRecord]


def _parse_message(view: memoryview, position: int, end: int) -> tuple[int, int, int, int, bytes | None,
                                                                       bytes | None, int]:
    """Parse one entry at `position` ending at or before `end`.

    Returns (offset, magic, attributes, timestamp, key, value, next_position).
    """
    offset, size = _ENTRY.unpack_from(view, position)
    body = position + LOG_OVERHEAD
    message_end = body + size
    if size < _MIN_MESSAGE_SIZE[0] or message_end > end:
        raise DecodeError(f"message size {size} out of range", position + 8)
    crc, magic, attributes = _MESSAGE_V0.unpack_from(view, body)
    if magic not in (0, 1):
        raise DecodeError(f"message magic {magic} is not 0 or 1", body + 4)
    if size < _MIN_MESSAGE_SIZE[magic]:
        raise DecodeError(f"message size {size} too small for magic {magic}", position + 8)
    if zlib.crc32(view[body + 4:message_end]) != crc:
        raise DecodeError("message CRC32 mismatch", body)
    cursor = body + 6
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _TIMESTAMP.unpack_from(view, cursor)
        cursor += 8
    key, cursor = _read_bytes(view, cursor, message_end)
    value, cursor = _read_bytes(view, cursor, message_end)
    if cursor != message_end:
        raise DecodeError("message size does not match its fields", cursor)
    return offset, magic, attributes, timestamp, key, value, message_end


def _read_bytes(view: memoryview, position: int, end: int) -> tuple[bytes | None, int]:
    if end - position < 4:
        raise DecodeError("truncated bytes length", position)
    (length,) = _INT32.unpack_from(view, position)
    position += 4
    if length == -1:
        return None, position
    if length < -1 or length > end - position:
        raise DecodeError(f"bytes length {length} out of range", position - 4)
    return bytes(view[position:position + length]), position + length


def iter_message_set(buf: Buffer, *, allow_partial: bool = True,
                     max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> Iterator[MessageSetEntry]:
    """Top-level entries with their inner records (decompressed, absolute offsets).

    allow_partial: a trailing partial entry ends the iteration (fetch responses) instead of
    raising (produce requests).
    """
    view = memoryview(buf)
    position = 0
    end = len(view)
    while position < end:
        if end - position < LOG_OVERHEAD:
            if allow_partial:
                return
            raise DecodeError("truncated message set entry", position)
        (size,) = _INT32.unpack_from(view, position + 8)
        if size >= 0 and LOG_OVERHEAD + size > end - position and allow_partial:
            return
        offset, magic, attributes, timestamp, key, value, next_position = _parse_message(view, position, end)
        codec = attributes & 0x07
        timestamp_type = 1 if magic == 1 and attributes & _TIMESTAMP_TYPE_MASK else 0
        if codec == Compression.NONE:
            records = [LegacyRecord(offset, timestamp, key, value, magic, timestamp_type)]
        else:
            records = _inner_records(position, offset, magic, codec, timestamp, timestamp_type, value,
                                     max_output_bytes)
        yield MessageSetEntry(offset, magic, codec, timestamp, timestamp_type, records)
        position = next_position


def _inner_records(position: int, wrapper_offset: int, magic: int, codec: int, wrapper_timestamp: int,
                   timestamp_type: int, value: bytes | None, max_output_bytes: int) -> list[LegacyRecord]:
    if codec > Compression.ZSTD:
        raise DecodeError(f"unknown compression codec {codec}", position + 17)
    if value is None:
        raise DecodeError("compressed wrapper message without a value", position)
    inner = memoryview(decompress(codec, value, max_output_bytes))
    records: list[LegacyRecord] = []
    cursor = 0
    while cursor < len(inner):
        if len(inner) - cursor < LOG_OVERHEAD:
            raise DecodeError("truncated inner message", position)
        offset, inner_magic, attributes, timestamp, key, inner_value, cursor = _parse_message(
            inner, cursor, len(inner))
        if attributes & 0x07:
            raise DecodeError("nested compression: compressed message inside a compressed wrapper", position)
        if inner_magic != magic:
            raise DecodeError("inner message magic differs from its wrapper's", position)
        if timestamp_type == 1:
            timestamp = wrapper_timestamp
        records.append(LegacyRecord(offset, timestamp, key, inner_value, magic, timestamp_type))
    if not records:
        raise DecodeError("compressed wrapper message with no inner messages", position)
    if magic == 1:
        # KIP-31: wrapper offset = absolute offset of the last inner message. Producers send
        # wrapper offset 0 (the broker assigns): a negative base keeps inner offsets, as Java does.
        base = wrapper_offset - records[-1].offset
        if base >= 0:
            for record in records:
                record.offset += base
    return records


def read_message_set(buf: Buffer, *, allow_partial: bool = True,
                     max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> list[LegacyRecord]:
    """All records of a message set, wrappers flattened."""
    return [record for entry in iter_message_set(buf, allow_partial=allow_partial,
                                                 max_output_bytes=max_output_bytes)
            for record in entry.records]


def encode_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None) -> bytes:
    """One message-set entry (offset, size, crc, magic, attributes, [timestamp], key, value)."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _TIMESTAMP.pack(timestamp)
    for data in (key, value):
        if data is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(data))
            body += data
    return _ENTRY.pack(offset, len(body) + 4) + struct.pack(">I", zlib.crc32(body)) + bytes(body)


def build_message_set(records: Iterable[tuple[int, int, bytes | None, bytes | None]], magic: int,
                      compression: Compression | int = Compression.NONE, *,
                      log_append_time: bool = False) -> bytes:
    """Encode (offset, timestamp, key, value) tuples as a magic 0/1 message set.

    With compression, all records go into one wrapper: magic 1 inner offsets are relative to
    the first and the wrapper carries the last absolute offset; magic 0 inner offsets absolute.
    """
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not 0 or 1")
    codec = Compression(compression)
    items = list(records)
    if not items:
        return b""
    timestamp_type = _TIMESTAMP_TYPE_MASK if magic == 1 and log_append_time else 0
    if codec == Compression.NONE:
        return b"".join(encode_message(offset, magic, timestamp_type, timestamp, key, value)
                        for offset, timestamp, key, value in items)
    first = items[0][0]
    inner = b"".join(encode_message(offset - first if magic == 1 else offset, magic, 0,
                                    timestamp, key, value)
                     for offset, timestamp, key, value in items)
    payload = compress(codec, inner)
    if codec == Compression.LZ4 and magic == 0:
        payload = _lz4_broken_header_checksum(payload)
    wrapper_timestamp = max(timestamp for _, timestamp, _, _ in items) if magic == 1 else NO_TIMESTAMP
    return encode_message(items[-1][0], magic, int(codec) | timestamp_type, wrapper_timestamp, None, payload)


def _lz4_broken_header_checksum(frame: bytes) -> bytes:
    """Magic 0 readers (Kafka 0.8/0.9 and clients) expect the checksum computed over the magic too."""
    flags = frame[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    broken = (_xxh32(frame[0:end]) >> 8) & 0xFF
    return frame[:end] + bytes([broken]) + frame[end + 1:]
