"""Walking a segment's entries: index rebuilds and crash recovery.

Recovery (seed 002, Kafka's LogLoader): every segment from the recovery point on is re-read with
CRC checks and the log is cut at the first torn or corrupt entry; the segments before it are
compared with what passed that check before (loading.py, verified.py).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from vdl_broker.log.entry import ENTRY_TYPES, HEADER, HEADER_SIZE
from vdl_broker.log.fileio import atomic_write
from vdl_broker.raft.types import EntryType
from vdl_wire.records.batch_header import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    batch_length,
)

RECOVERY_POINT_FILE = "recovery-point"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
_POINT = struct.Struct("<qI")  # base index of the first segment that may hold unsynced data, crc
_DATA = int(EntryType.DATA)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Scanned:
    position: int
    type: int
    term: int
    index: int
    payload_length: int


def scan(buf: memoryview, start: int, end: int, first_index: int, verify_crc: bool) -> Iterator[Scanned]:
    """Entries of `buf[start:end]` in order, stopping silently at the first one that is torn,
    out of sequence or (with `verify_crc`) corrupt; the caller sees where the valid part ends."""
    position = start
    expected = first_index
    while position + HEADER_SIZE <= end:
        crc, entry_type, term, index, length = HEADER.unpack_from(buf, position)
        payload_end = position + HEADER_SIZE + length
        if entry_type not in ENTRY_TYPES or index != expected or term < 0 or payload_end > end:
            return
        if entry_type == _DATA:
            payload = position + HEADER_SIZE
            if (length < BATCH_HEADER_SIZE or buf[payload + MAGIC_OFFSET] != MAGIC
                    or batch_length(buf, payload) + LOG_OVERHEAD != length):
                return
        if verify_crc:
            with buf[position + 4:payload_end] as span:
                if crc32c.crc32c(span) != crc:
                    return
        yield Scanned(position, entry_type, term, index, length)
        position = payload_end
        expected += 1


def save_recovery_point(directory: Path, base_index: int, durable: bool) -> None:
    body = struct.pack("<q", base_index)
    atomic_write(directory / RECOVERY_POINT_FILE, _POINT.pack(base_index, crc32c.crc32c(body)), durable)


def advance_recovery_point(directory: Path, base_index: int, durable: bool) -> bool:
    """Move the recovery point up to `base_index` (everything before it is durable and checked);
    False, logged, when it cannot be written (a full disk): the point on disk stays lower, which
    only makes the next unclean start check more. Moving it down is not optional: that is
    save_recovery_point's, whose failure the caller must see."""
    try:
        save_recovery_point(directory, base_index, durable)
    except OSError as error:
        logger.warning("%s: cannot move the recovery point (%s)", directory, error)
        return False
    return True


def load_recovery_point(directory: Path) -> int | None:
    """Base index of the first segment to re-validate, or None when unknown (re-validate all)."""
    try:
        data = (directory / RECOVERY_POINT_FILE).read_bytes()
    except FileNotFoundError:
        return None
    if len(data) != _POINT.size:
        return None
    base_index, crc = _POINT.unpack(data)
    return base_index if crc == crc32c.crc32c(struct.pack("<q", base_index)) else None
