"""Snapshot files of a Raft group's state machine (the metadata group's): the state after entry
`index` (term `term`), so the log before it can go and a restart replays only what follows.

    snapshot-<index, 20 digits>.snap := header length u32 | header (JSON) | data | crc32c u32
    header := {"version": 1, "index": N, "term": N, "size": len(data)}

The crc covers everything before it. Written to a temporary name, synced and renamed (the
directory synced too), so a crash leaves the previous snapshot or the new one, never half of
one; the older ones are deleted after. `data` is opaque here: the state machine's own bytes.
"""

from __future__ import annotations

import json
import logging
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from vdl_broker.log.fileio import atomic_write

log = logging.getLogger(__name__)

SNAPSHOT_VERSION = 1  # the newest version of the file this release reads and writes
_LENGTH = struct.Struct("<I")
_SUFFIX = ".snap"


@dataclass(frozen=True)
class Snapshot:
    index: int
    term: int
    data: bytes


def _name(index: int) -> str:
    return f"snapshot-{index:020d}{_SUFFIX}"


def encode(snapshot: Snapshot) -> bytes:
    header = json.dumps({"version": SNAPSHOT_VERSION, "index": snapshot.index, "term": snapshot.term,
                         "size": len(snapshot.data)}, separators=(",", ":")).encode()
    body = _LENGTH.pack(len(header)) + header + snapshot.data
    return body + _LENGTH.pack(crc32c.crc32c(body))


def decode(raw: bytes, where: str) -> Snapshot:
    """The snapshot in `raw`; ValueError naming `where` when it is damaged or of a newer version."""
    if len(raw) < 2 * _LENGTH.size:
        raise ValueError(f"{where}: {len(raw)} bytes, too short for a snapshot")
    body = raw[:-_LENGTH.size]
    if _LENGTH.unpack_from(raw, len(body))[0] != crc32c.crc32c(body):
        raise ValueError(f"{where}: checksum mismatch")
    (length,) = _LENGTH.unpack_from(body)
    try:
        header = json.loads(body[_LENGTH.size:_LENGTH.size + length])
        version, index, term, size = header["version"], header["index"], header["term"], header["size"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{where}: unreadable header ({error})") from None
    if version > SNAPSHOT_VERSION:
        raise ValueError(f"{where}: snapshot version {version}, newer than this release reads ({SNAPSHOT_VERSION})")
    data = body[_LENGTH.size + length:]
    if len(data) != size:
        raise ValueError(f"{where}: {len(data)} bytes of data, the header says {size}")
    return Snapshot(int(index), int(term), data)


class SnapshotStore:
    """The snapshot files in one directory (the group's log directory)."""

    def __init__(self, directory: Path, durable: bool = True) -> None:
        self.directory = Path(directory)
        self.durable = durable

    def latest(self) -> Snapshot | None:
        """The newest readable snapshot (a damaged one is skipped, loudly: an older one, or the log
        from its start, serves instead)."""
        for path in sorted(self.directory.glob(f"snapshot-*{_SUFFIX}"), reverse=True):
            try:
                return decode(path.read_bytes(), str(path))
            except (OSError, ValueError) as error:
                log.error("%s: %s: skipped", path, error)
        return None

    def save(self, snapshot: Snapshot) -> None:
        """Durably, then delete the older ones."""
        atomic_write(self.directory / _name(snapshot.index), encode(snapshot), self.durable)
        for path in self.directory.glob(f"snapshot-*{_SUFFIX}"):
            if path.name < _name(snapshot.index):
                path.unlink(missing_ok=True)

    def size_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.directory.glob(f"snapshot-*{_SUFFIX}"))
