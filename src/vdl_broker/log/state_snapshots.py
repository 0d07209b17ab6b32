"""State snapshots of a stream's log: `<offset>.snapshot` files beside the segments.

A snapshot at offset X holds state derived from every batch below X (the server's producer and
transaction state), so a restart loads the newest usable one and reads only the batches from X
on, instead of the whole log (Kafka's ProducerStateManager writes `<offset>.snapshot` at each
segment roll for the same reason). The log layer keeps the files in step with the segments and
never reads the payload:

- written atomically (temp file, rename), with a format version and a CRC-32C of everything;
- a snapshot whose file is unreadable, of an unknown version, or whose CRC does not match is
  deleted and the next older one is tried: a damaged snapshot costs replay time, never state;
- retention deletes the snapshots below the new log start with the segments; a truncation of
  the log's tail (Raft conflict, crash recovery) deletes those above the new log end; a reset
  deletes them all.

File (little-endian): magic b"VDLS" | version u16 | offset i64 | payload length u32 | payload |
crc32c u32 of everything before it.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import crc32c

from vdl_broker.log.fileio import atomic_write

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
MAGIC = b"VDLS"
VERSION = 1
_HEADER = struct.Struct("<4sHqI")
_CRC = struct.Struct("<I")


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files present, ascending."""
    offsets = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def encode_snapshot(offset: int, payload: bytes) -> bytes:
    body = _HEADER.pack(MAGIC, VERSION, offset, len(payload)) + payload
    return body + _CRC.pack(crc32c.crc32c(body))


def decode_snapshot(data: bytes, offset: int) -> bytes:
    """The payload of a snapshot file expected at `offset`; ValueError naming what is wrong."""
    if len(data) < _HEADER.size + _CRC.size:
        raise ValueError(f"{len(data)} bytes, shorter than a snapshot's header and checksum")
    magic, version, stored_offset, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"magic {magic!r}, not {MAGIC!r}")
    if version != VERSION:
        raise ValueError(f"format version {version}, this node reads version {VERSION}")
    if len(data) != _HEADER.size + length + _CRC.size:
        raise ValueError(f"{len(data)} bytes, the header says {_HEADER.size + length + _CRC.size}")
    body = data[: -_CRC.size]
    if _CRC.unpack_from(data, len(body))[0] != crc32c.crc32c(body):
        raise ValueError("checksum mismatch")
    if stored_offset != offset:
        raise ValueError(f"holds offset {stored_offset}, its name says {offset}")
    return bytes(data[_HEADER.size: _HEADER.size + length])


def write_snapshot(directory: Path, offset: int, payload: bytes, durable: bool) -> None:
    atomic_write(snapshot_path(directory, offset), encode_snapshot(offset, payload), durable)


def load_latest(directory: Path, max_offset: int, min_offset: int = 0) -> tuple[int, bytes] | None:
    """(offset, payload) of the newest readable snapshot in [min_offset, max_offset], or None.
    Unreadable ones on the way are deleted (logged): the next older one, or none, is used."""
    for offset in reversed(snapshot_offsets(directory)):
        if offset > max_offset:
            continue
        if offset < min_offset:
            break
        path = snapshot_path(directory, offset)
        try:
            return offset, decode_snapshot(path.read_bytes(), offset)
        except (OSError, ValueError) as error:
            logger.warning("%s: snapshot %s is unusable (%s): deleted, an older one or the log is used",
                           directory, path.name, error)
            discard(path)
    return None


def discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as error:  # a read-only or failing disk: loading skips it again next time
        logger.warning("%s: could not delete (%s)", path, error)


def delete_below(directory: Path, offset: int) -> int:
    """Retention: the snapshots below the new log start go with its segments. How many."""
    doomed = [o for o in snapshot_offsets(directory) if o < offset]
    for o in doomed:
        discard(snapshot_path(directory, o))
    return len(doomed)


def delete_above(directory: Path, offset: int) -> int:
    """The log's tail was cut to end at `offset`: snapshots above it describe batches it no
    longer holds. How many were deleted."""
    doomed = [o for o in snapshot_offsets(directory) if o > offset]
    for o in doomed:
        discard(snapshot_path(directory, o))
    return len(doomed)
