"""What a sealed segment looked like when it last passed the full check at open (CRC of every
entry, its indexes rebuilt from it), so later opens need not walk it again.

One file per log, `segment-checksums`: for each sealed segment, its entry count and Kafka
offsets and the size and CRC32C of its .log and index files, as they were right after that
check. A segment whose files still have exactly those sizes and checksums holds exactly the
bytes that passed, so the check would pass again: one CRC32C pass over the files (C speed, about
0.1 s per GiB) stands in for the entry-by-entry walk (about 20 s per GiB of CPU), and a flipped
byte anywhere in an old segment or its indexes is still found at open -- it makes the record
disagree, and the segment (and every one after it) gets the full check, which cuts and records
the damage as before. Anything else that makes a record unusable (a missing, torn or stale file,
a segment rewritten by a truncation) also only means the full check: a record can make an open
cheaper, never less careful. Written without fsync for that reason.
"""

from __future__ import annotations

import json
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from vdl_broker.log.fileio import atomic_write
from vdl_broker.log.segment import Segment

CHECKSUMS_FILE = "segment-checksums"
_CRC = struct.Struct("<I")
_VERSION = 1
_ABSENT = (-1, 0)  # (size, crc) of a file that does not exist


@dataclass(frozen=True)
class SegmentRecord:
    count: int  # entries
    base_offset: int
    next_offset: int
    has_data: bool
    files: tuple[tuple[int, int], ...]  # (size, CRC32C) of the .log, .ridx, .index, .timeindex


def file_checksum(path: Path) -> tuple[int, int]:
    """(size, CRC32C) of the file at `path`, `_ABSENT` if there is none."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size == 0:
                return 0, 0
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mapped:
                return size, crc32c.crc32c(mapped)
    except FileNotFoundError:
        return _ABSENT


def _paths(segment: Segment) -> tuple[Path, ...]:
    return segment.log_path, segment.ridx.path, segment.oidx.path, segment.tidx.path


def record_of(segment: Segment) -> SegmentRecord:
    """The record of a loaded segment as its files are now."""
    return SegmentRecord(segment.count, segment.base_offset, segment.next_offset, segment.has_data,
                         tuple(file_checksum(path) for path in _paths(segment)))


def still_holds(segment: Segment, record: SegmentRecord) -> bool:
    """Whether the segment's files are still byte for byte what `record` describes (the .log
    first: a mismatch there skips reading the indexes)."""
    return all(file_checksum(path) == expected for path, expected in zip(_paths(segment), record.files, strict=True))


def load_records(directory: Path) -> dict[int, SegmentRecord]:
    """base index -> record; {} when the file is missing, torn or unreadable (full checks)."""
    try:
        data = (directory / CHECKSUMS_FILE).read_bytes()
    except OSError:
        return {}
    if len(data) < _CRC.size or _CRC.unpack_from(data)[0] != crc32c.crc32c(data[_CRC.size:]):
        return {}
    try:
        body = json.loads(data[_CRC.size:])
        if body.get("version") != _VERSION:
            return {}
        return {int(base): SegmentRecord(int(count), int(base_offset), int(next_offset), bool(has_data),
                                         tuple((int(size), int(crc)) for size, crc in files))
                for base, (count, base_offset, next_offset, has_data, files) in body["segments"].items()
                if len(files) == 4}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def save_records(directory: Path, records: dict[int, SegmentRecord]) -> None:
    body = json.dumps({"version": _VERSION, "segments": {
        str(base): [r.count, r.base_offset, r.next_offset, r.has_data, [list(f) for f in r.files]]
        for base, r in sorted(records.items())}}, separators=(",", ":")).encode()
    atomic_write(directory / CHECKSUMS_FILE, _CRC.pack(crc32c.crc32c(body)) + body, durable=False)
