"""Raft entries as stored in segments, and the few RecordBatch v2 header fields the log needs.

On-disk entry (little-endian): crc32c u32 | type u8 | term i64 | index i64 | payload length u32 |
payload. The CRC covers everything after itself (header rest + payload), so a torn or flipped
entry is found by recovery.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import crc32c


class EntryType(IntEnum):
    DATA = 1
    NOOP = 2
    CONFIG = 3
    METADATA = 4


@dataclass(slots=True)
class Entry:
    index: int
    term: int
    type: EntryType
    payload: bytes | memoryview


class OffsetOutOfRange(LookupError):
    """A Kafka offset outside [log_start_offset, log_end_offset]."""


class IndexOutOfRange(LookupError):
    """A Raft index that is compacted away (below first_index - 1) or beyond last_index."""


HEADER = struct.Struct("<IBqqI")
HEADER_SIZE = HEADER.size  # 25
_HEADER_REST = struct.Struct("<BqqI")
ENTRY_TYPES = frozenset(int(t) for t in EntryType)

# Kafka protocol guide: RecordBatch v2 header (big-endian); only the fields the log indexes.
BATCH_HEADER_SIZE = 61
MAGIC_POSITION = 16


class BatchFields(NamedTuple):
    base_offset: int
    last_offset: int
    max_timestamp: int


# base offset, batch length, leader epoch, magic, crc, attributes, last offset delta, base ts, max ts
_HEAD = struct.Struct(">qiibIhiqq")


def batch_fields(buf: bytes | memoryview | bytearray, position: int = 0) -> BatchFields:
    """Base offset, last offset and max timestamp of the batch starting at `position`."""
    base, _, _, _, _, _, delta, _, max_ts = _HEAD.unpack_from(buf, position)
    return BatchFields(base, base + delta, max_ts)


def check_batch(payload: bytes | memoryview) -> BatchFields:
    """Sanity checks on a DATA payload (ValueError): one whole RecordBatch v2."""
    size = len(payload)
    if size < BATCH_HEADER_SIZE:
        raise ValueError(f"data payload of {size} bytes is shorter than a RecordBatch v2 header")
    base, length, _, magic, _, _, delta, _, max_ts = _HEAD.unpack_from(payload, 0)
    if length + 12 != size:
        raise ValueError(f"batch length {length} + 12 does not match payload size {size}")
    if magic != 2:
        raise ValueError(f"data payload has magic {magic}, expected 2")
    if delta < 0:
        raise ValueError("negative last offset delta")
    return BatchFields(base, base + delta, max_ts)


def encode_header(entry_type: int, term: int, index: int, payload: bytes | memoryview) -> bytes:
    rest = _HEADER_REST.pack(entry_type, term, index, len(payload))
    crc = crc32c.crc32c(payload, crc32c.crc32c(rest))
    return struct.pack("<I", crc) + rest


def entry_crc(buf: memoryview, position: int, payload_length: int) -> int:
    """CRC32C over the header rest and payload of the entry at `position` in `buf`."""
    with buf[position + 4:position + HEADER_SIZE + payload_length] as span:
        return crc32c.crc32c(span)
