"""Raft entries: the one Entry / EntryType of the project (the Raft core re-exports them), and
their on-disk encoding in segments.

On-disk entry (little-endian): crc32c u32 | type u8 | term i64 | index i64 | payload length u32 |
payload. The CRC covers everything after itself (header rest + payload), so a torn or flipped
entry is found by recovery.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

import crc32c


class EntryType(IntEnum):
    """Stored as one byte in every entry header and sent as-is on the Raft wire: never renumber."""

    DATA = 1  # one RecordBatch v2 with absolute offsets: the only type that takes Kafka offsets
    NOOP = 2  # a new leader's first entry of its term
    CONFIG = 3  # Raft membership (reserved)
    METADATA = 4  # a command of the metadata Raft group


@dataclass(slots=True)
class Entry:
    """One Raft log entry. `data` (the entry's payload) is never copied: bytes or a memoryview."""

    index: int
    term: int
    type: EntryType = EntryType.DATA
    data: bytes | memoryview = b""


class OffsetOutOfRange(LookupError):
    """A Kafka offset outside [log_start_offset, log_end_offset]."""


class IndexOutOfRange(LookupError):
    """A Raft index that is compacted away (below first_index - 1) or beyond last_index."""


HEADER = struct.Struct("<IBqqI")
HEADER_SIZE = HEADER.size  # 25
_HEADER_REST = struct.Struct("<BqqI")
ENTRY_TYPES = frozenset(int(t) for t in EntryType)


def encode_header(entry_type: int, term: int, index: int, payload: bytes | memoryview) -> bytes:
    rest = _HEADER_REST.pack(entry_type, term, index, len(payload))
    crc = crc32c.crc32c(payload, crc32c.crc32c(rest))
    return struct.pack("<I", crc) + rest


def entry_crc(buf: memoryview, position: int, payload_length: int) -> int:
    """CRC32C over the header rest and payload of the entry at `position` in `buf`."""
    with buf[position + 4:position + HEADER_SIZE + payload_length] as span:
        return crc32c.crc32c(span)
