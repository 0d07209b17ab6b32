"""Test payloads: RecordBatch v2 headers that look valid to the log (its CRC is not the log's concern)."""

from __future__ import annotations

from pathlib import Path

from vdl_broker.raft.types import Entry, EntryType
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, HEADER, LOG_OVERHEAD, MAGIC

_CYCLE = bytes(range(256))


def make_batch(base_offset: int, record_count: int = 1, max_timestamp: int = 0, body_size: int = 0) -> bytes:
    """base offset, batch length, magic 2, last offset delta, timestamps, record count; the body is
    filler bytes, not records."""
    size = BATCH_HEADER_SIZE + body_size
    buf = bytearray(size)
    HEADER.pack_into(buf, 0, base_offset, size - LOG_OVERHEAD, 0, MAGIC, 0, 0, record_count - 1,
                     max_timestamp, max_timestamp, 0, 0, 0, record_count)
    # byte i is (base_offset + i) & 0xFF: a slice of the 0..255 cycle repeated (a loop over the
    # bytes took most of the CPU of the tests that append thousands of batches)
    start = (base_offset + BATCH_HEADER_SIZE) & 0xFF
    buf[BATCH_HEADER_SIZE:] = (_CYCLE * ((start + body_size) // 256 + 1))[start:start + body_size]
    return bytes(buf)


def data_entry(index: int, term: int, base_offset: int, record_count: int = 1, max_timestamp: int = 0,
               body_size: int = 0) -> Entry:
    return Entry(index, term, EntryType.DATA, make_batch(base_offset, record_count, max_timestamp, body_size))


def noop_entry(index: int, term: int) -> Entry:
    return Entry(index, term, EntryType.NOOP, b"")


def config_entry(index: int, term: int, payload: bytes = b"config") -> Entry:
    return Entry(index, term, EntryType.CONFIG, payload)


def flip(path: Path, position: int) -> None:
    """Flip one bit of the byte at `position` of the file at `path` (a damaged disk)."""
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x40]))
