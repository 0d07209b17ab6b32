"""Opening a stream's log directory: finding its segments and, after an unclean stop, recovering.

Every segment from the recovery point on (normally just the active one: the segments before it
were synced) is re-read with CRC checks, its indexes rebuilt, and the log is cut at the first
torn or corrupt entry (seed 002, Kafka's LogLoader) -- after a clean shutdown too: a flipped
byte must be found before the node acknowledges or votes with it. The segments before the
recovery point get the same full check unless their files are still byte for byte what passed
it at an earlier open (verified.py: one CRC32C pass over each file instead of a walk over its
entries), so a flipped byte in an old sealed segment is found all the same, and the first
segment that fails that comparison is checked in full with everything after it. Without
LogConfig.verify_on_open (Kafka's behaviour) the segments before the recovery point are trusted
unread. Trusted segments take their base offset from the first record of their offset index;
their indexes are checked when first used.

A cut is a torn write (the unsynced tail of an unclean stop: nothing can have been acknowledged)
or damage to durable data: after a clean shutdown everything was synced; otherwise intact
entries after the bad one (in the same segment or a later one) show the write was not the last.
Damage is recorded durably (damage.py, with the highest index the log held) before the cut.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from vdl_broker.log.config import LogConfig
from vdl_broker.log.damage import DamageRecord, load_damage, save_damage
from vdl_broker.log.entry import HEADER, HEADER_SIZE, DamagedEntry
from vdl_broker.log.fileio import fsync_dir, fsync_file
from vdl_broker.log.log_start import LogStart, load_log_start
from vdl_broker.log.recovery import CLEAN_SHUTDOWN_FILE, load_recovery_point, scan
from vdl_broker.log.segment import LOG_SUFFIX, Segment
from vdl_broker.log.verified import SegmentRecord, load_records, record_of, save_records, still_holds
from vdl_broker.raft.types import EntryType
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, batch_fields

logger = logging.getLogger(__name__)

_DATA = int(EntryType.DATA)
_OFFSET_INDEX_RECORD = struct.Struct("<II")  # relative offset, position (offset_index.py)


@dataclass
class LoadedLog:
    segments: list[Segment]  # the last one is open for appends
    previous_term: int  # term of entry first_index - 1
    recovered: bool  # files were cut or deleted: the directory needs a sync
    damage: DamageRecord | None = None  # durable data was lost (now or at an earlier open)


def new_segment(directory: Path, config: LogConfig, base_index: int, base_offset: int) -> Segment:
    return Segment(directory, base_index, base_offset, config.index_interval_bytes)


def ensure_loaded(segments: list[Segment], i: int) -> Segment:
    """Segment `i` with its indexes in memory (loaded, and checked, on first use)."""
    segment = segments[i]
    if not segment.loaded:
        expected = segments[i + 1].base_index - segment.base_index if i + 1 < len(segments) else None
        segment.load(expected)
    return segment


def load(directory: Path, config: LogConfig, now_ms: float) -> LoadedLog:
    """Open (creating if needed) the log in `directory`; recovers after an unclean stop."""
    directory.mkdir(parents=True, exist_ok=True)
    for temp in directory.glob("*.tmp"):
        temp.unlink()
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    start = load_log_start(directory) or LogStart()
    bases = sorted(int(p.name[: -len(LOG_SUFFIX)]) for p in directory.glob(f"*{LOG_SUFFIX}")
                   if p.name[: -len(LOG_SUFFIX)].isdigit())
    # Retention persists the new start before deleting: finish a deletion a crash interrupted.
    while len(bases) > 1 and bases[1] <= start.first_index:
        new_segment(directory, config, bases.pop(0), 0).delete()
    segments = [new_segment(directory, config, base, 0) for base in bases]
    for segment in segments:
        segment.size = segment.file_size()
    if not segments:
        segments = [new_segment(directory, config, start.first_index, start.start_offset)]
    point = load_recovery_point(directory)
    first = 0 if point is None else max(0, bisect_right(bases, point) - 1)
    records = load_records(directory) if config.verify_on_open else {}
    if config.verify_on_open:
        first = _still_verified(segments, first, records)
    _load_trusted(segments, first)
    cut = _recover(directory, segments, first, start, all_synced=clean, fsync=config.fsync)
    _chain_offsets(segments, start)
    if config.verify_on_open:
        _record_verified(directory, segments, first, records)
    for segment in segments[:-1]:
        segment.sealed = True
        if segment.loaded:  # checked or rebuilt above: its indexes from their files now
            segment.map_indexes()
    active = segments[-1]
    if not active.loaded:
        active.load(None)
    active.open_for_append()
    active.created_ms = now_ms
    first_index = segments[0].base_index
    previous_term = start.previous_term if start.first_index == first_index else 0
    if start.first_index != first_index:
        logger.warning("%s: log starts at index %d, persisted start says %d: previous term unknown",
                       directory, first_index, start.first_index)
    if clean:
        marker.unlink()
        if config.fsync:  # fsync=False (tests, benchmarks) skips every fsync
            fsync_dir(directory)
    return LoadedLog(segments, previous_term, recovered=not clean or cut, damage=load_damage(directory))


def _still_verified(segments: list[Segment], first: int, records: dict[int, SegmentRecord]) -> int:
    """How many of the first `first` segments (all sealed) are still exactly what passed the
    full check at an earlier open: their entry count still reaches the next segment's base,
    their offsets still continue one another, their files still have the recorded checksums."""
    previous_end: int | None = None
    for i in range(first):
        segment = segments[i]
        record = records.get(segment.base_index)
        if record is None or record.count != segments[i + 1].base_index - segment.base_index:
            return i
        if record.has_data and previous_end is not None and record.base_offset != previous_end:
            return i
        if not still_holds(segment, record):
            logger.warning("%s: changed since it was last checked: checking it and every later segment entry "
                           "by entry", segment.log_path)
            return i
        if record.has_data:
            previous_end = record.next_offset
    return first


def _record_verified(directory: Path, segments: list[Segment], trusted: int,
                     records: dict[int, SegmentRecord]) -> None:
    """Record every sealed segment as it passed this open: the trusted ones as they were, the
    ones checked in full (now loaded) as their files are now."""
    kept = {s.base_index: records[s.base_index] for s in segments[:trusted]}
    kept |= {s.base_index: record_of(s) for s in segments[trusted:-1]}
    if kept != records:
        try:
            save_records(directory, kept)
        except OSError as error:  # disk full: only a longer check at the next open
            logger.warning("%s: cannot record its checked segments (%s)", directory, error)


def _load_trusted(segments: list[Segment], count: int) -> None:
    """The first `count` segments, all sealed: learn their base offsets cheaply (first
    offset-index record); their indexes are checked when first used."""
    for i, segment in enumerate(segments[:count]):
        segment.sealed = True
        if not _peek_base_offset(segment):
            segment.load(segments[i + 1].base_index - segment.base_index)


def _peek_base_offset(segment: Segment) -> bool:
    try:
        with open(segment.oidx.path, "rb") as f:
            record = f.read(_OFFSET_INDEX_RECORD.size)
    except FileNotFoundError:
        return False
    if len(record) != _OFFSET_INDEX_RECORD.size:
        return False
    relative, position = _OFFSET_INDEX_RECORD.unpack(record)
    if relative != 0:
        return False
    try:
        head = segment.span(position, position + HEADER_SIZE + BATCH_HEADER_SIZE)
        if len(head) < HEADER_SIZE + BATCH_HEADER_SIZE or head[4] != _DATA:
            return False
        segment.base_offset = batch_fields(head, HEADER_SIZE).base_offset
    except (OSError, ValueError, struct.error, DamagedEntry):  # the index points past the log's end
        return False
    segment.has_data = True
    segment.next_offset = segment.base_offset
    return True


def _recover(directory: Path, segments: list[Segment], first: int, start: LogStart, all_synced: bool,
             fsync: bool) -> bool:
    """Re-validate every segment from `first` on with CRCs; cut at the first bad entry (True if
    anything was cut). `all_synced`: a clean shutdown synced everything, so any loss is damage."""
    previous_end: int | None = None  # where the offsets of the trusted part end
    for j in range(first - 1, -1, -1):
        if ensure_loaded(segments, j).has_data:
            previous_end = segments[j].next_offset
            break
    else:
        if first > 0:
            previous_end = start.start_offset
    for i in range(first, len(segments)):
        segment = segments[i]
        file_size = segment.file_size()
        indexed = _indexed_count(segment) if all_synced else 0
        end = segment.rebuild(verify_crc=True)
        expected = segments[i + 1].base_index - segment.base_index if i + 1 < len(segments) else None
        if segment.has_data and previous_end is not None and segment.base_offset != previous_end:
            end = 0  # offsets do not continue the previous segment: nothing here can be trusted
            segment.rebuild_empty()
        whole = end == file_size and (expected is None or segment.count == expected)
        if not whole:
            cut_at = segment.base_index + segment.count
            held = _held_through(segment, end, file_size, segments[i + 1:])
            if all_synced:
                held = max(held, cut_at, segment.base_index + indexed - 1)
            if held >= cut_at:
                logger.error("%s: damaged entry %d in %s, which held entries through %d: recorded as "
                             "damage, to be fetched again from a peer", directory, cut_at,
                             segment.log_path.name, held)
                save_damage(directory, DamageRecord(held).merge(load_damage(directory)), durable=fsync)
        if end < file_size:
            os.truncate(segment.log_path, end)
        if fsync and not all_synced and end > 0:
            # What a killed process wrote is in the page cache but maybe not on disk; from here on
            # the log calls it durable (its node acknowledges and votes with it), so make it so.
            fsync_file(segment.log_path)
        segment.flush_indexes_or_drop()
        segment.loaded = True
        if segment.has_data:
            previous_end = segment.next_offset
        if not whole:
            dropped = segments[i + 1:]
            logger.warning(
                "%s: unclean shutdown: cut segment %s at byte %d of %d (entries from index %d on) "
                "and deleted %d later segment(s)", directory, segment.log_path.name, end,
                file_size, segment.base_index + segment.count, len(dropped))
            for later in dropped:
                later.delete()
            del segments[i + 1:]
            return True
    # A cut can leave an empty segment behind a non-empty one: it stays as the active one.
    return False


def _indexed_count(segment: Segment) -> int:
    """Entries the segment's Raft index file recorded when last flushed (at close or roll)."""
    try:
        return segment.ridx.path.stat().st_size // segment.ridx.record_size
    except FileNotFoundError:
        return 0


def _held_through(segment: Segment, end: int, file_size: int, later: list[Segment]) -> int:
    """The last index of intact entries found after the bad entry at byte `end` (0 if none):
    skipping it by its header's length, then in the later segments."""
    held = 0
    bad_index = segment.base_index + segment.count
    if end + HEADER_SIZE <= file_size:
        with open(segment.log_path, "rb") as f:
            data = memoryview(f.read())
        _, _, _, index, length = HEADER.unpack_from(data, end)
        after = end + HEADER_SIZE + length
        if index == bad_index and after < file_size:
            for entry in scan(data, after, file_size, bad_index + 1, verify_crc=True):
                held = entry.index
    for following in later:
        try:
            with open(following.log_path, "rb") as f:
                data = memoryview(f.read())
        except FileNotFoundError:
            continue
        for entry in scan(data, 0, len(data), following.base_index, verify_crc=True):
            held = max(held, entry.index)
    return held


def _chain_offsets(segments: list[Segment], start: LogStart) -> None:
    """Segments without data take their base offset from the data before them."""
    previous_end = start.start_offset
    for i, segment in enumerate(segments):
        if not segment.has_data:
            segment.base_offset = previous_end
            segment.next_offset = previous_end
            previous_end = segment.next_offset
            continue
        following = segments[i + 1] if i + 1 < len(segments) else None
        if following is not None and following.has_data:
            previous_end = following.base_offset
        else:
            ensure_loaded(segments, i)
            previous_end = segment.next_offset
