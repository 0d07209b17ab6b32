"""Test payloads: RecordBatch v2 headers that look valid to the log (its CRC is not the log's concern)."""

from __future__ import annotations

import struct

from vdl_broker.log import Entry, EntryType

HEADER = 61


def make_batch(base_offset: int, record_count: int = 1, max_timestamp: int = 0, body_size: int = 0) -> bytes:
    """base offset, batch length, magic 2, last offset delta, max timestamp; zero records body."""
    size = HEADER + body_size
    buf = bytearray(size)
    struct.pack_into(">qi", buf, 0, base_offset, size - 12)
    buf[16] = 2
    struct.pack_into(">i", buf, 23, record_count - 1)
    struct.pack_into(">qq", buf, 27, max_timestamp, max_timestamp)
    struct.pack_into(">i", buf, 57, record_count)
    for i in range(HEADER, size):
        buf[i] = (base_offset + i) & 0xFF
    return bytes(buf)


def data_entry(index: int, term: int, base_offset: int, record_count: int = 1, max_timestamp: int = 0,
               body_size: int = 0) -> Entry:
    return Entry(index, term, EntryType.DATA, make_batch(base_offset, record_count, max_timestamp, body_size))


def noop_entry(index: int, term: int) -> Entry:
    return Entry(index, term, EntryType.NOOP, b"")


def config_entry(index: int, term: int, payload: bytes = b"config") -> Entry:
    return Entry(index, term, EntryType.CONFIG, payload)
