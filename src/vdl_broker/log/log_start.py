"""Where a stream's log starts: the `log-start` file written by retention and by a reset.

Retention and a snapshot install drop a prefix of the log; the file keeps what the remaining
segments cannot tell by themselves: the Kafka log start offset (a log without data after the cut
still needs it), the first Raft index and the term of the entry before it (Raft's snapshot point,
which term_at(first_index - 1) answers).
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from vdl_broker.log.fileio import atomic_write

logger = logging.getLogger(__name__)

LOG_START_FILE = "log-start"
# DeleteRecords moves the log start to any offset, inside a segment: the offset, durable, until
# retention deletes the segments below it (the stream's Raft group agreed on it: it is not
# derived from the segments, so a replica keeps it across restarts here).
DELETED_BELOW_FILE = "deleted-below"
_DELETED_BELOW = struct.Struct("<q")
_LOG_START = struct.Struct("<qqq")  # log start offset, first Raft index, term of first index - 1
_CRC = struct.Struct("<I")


@dataclass(frozen=True)
class LogStart:
    start_offset: int = 0
    first_index: int = 1
    previous_term: int = 0


def save_log_start(directory: Path, state: LogStart, durable: bool) -> None:
    """Written before the segments it makes obsolete are deleted (loading finishes a deletion a
    crash interrupted)."""
    body = _LOG_START.pack(state.start_offset, state.first_index, state.previous_term)
    atomic_write(directory / LOG_START_FILE, body + _CRC.pack(crc32c.crc32c(body)), durable)


def load_log_start(directory: Path) -> LogStart | None:
    """The saved start, or None when there is none or it is unreadable."""
    try:
        data = (directory / LOG_START_FILE).read_bytes()
    except FileNotFoundError:
        return None
    body = data[: _LOG_START.size]
    if len(data) != _LOG_START.size + _CRC.size or _CRC.unpack_from(data, _LOG_START.size)[0] != crc32c.crc32c(body):
        logger.warning("%s: unreadable %s, ignored", directory, LOG_START_FILE)
        return None
    return LogStart(*_LOG_START.unpack(body))


def save_deleted_below(directory: Path, offset: int, durable: bool) -> None:
    body = _DELETED_BELOW.pack(offset)
    atomic_write(directory / DELETED_BELOW_FILE, body + _CRC.pack(crc32c.crc32c(body)), durable)


def load_deleted_below(directory: Path) -> int:
    """The offset DeleteRecords deleted records below, or 0 (never, or unreadable: retention
    and reads then fall back to the segments' own start)."""
    try:
        data = (directory / DELETED_BELOW_FILE).read_bytes()
    except FileNotFoundError:
        return 0
    body = data[: _DELETED_BELOW.size]
    if len(data) != _DELETED_BELOW.size + _CRC.size or _CRC.unpack_from(data, _DELETED_BELOW.size)[0] != crc32c.crc32c(body):
        logger.warning("%s: unreadable %s, ignored", directory, DELETED_BELOW_FILE)
        return 0
    return int(_DELETED_BELOW.unpack(body)[0])
