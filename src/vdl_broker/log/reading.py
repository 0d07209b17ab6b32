"""Reading a stream's log: entries by Raft index (replication) and batches by Kafka offset.

Both prefer the tail cache, which always ends at the log's last entry, and fall back to the
segments for older entries. Reads by offset return the stored batches as memoryviews of the
mapped segment files or of the appended buffers, never per-record objects: a fetch costs the
same whatever its records' count.

Entries read from a segment are checked against their CRC on the way out (DamagedEntry): the
files passed that check when the log opened, but a byte flipped on disk since would otherwise
reach a follower -- which stores it as its own, under a CRC of its own -- or a consumer that does
not check CRCs (librdkafka's default). The offset lookups check the entries they read too: a
batch header's flipped bit would be a wrong offset (a high watermark, an epoch's end). The tail
cache holds what this process appended: not checked. The cost is one CRC32C pass over what is
read from disk (README: a sixth more broker CPU for a consumer reading from the segments).
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vdl_broker.log.entry import IndexOutOfRange, OffsetOutOfRange
from vdl_broker.log.loading import ensure_loaded
from vdl_broker.raft.types import Entry, EntryType
from vdl_wire.records.batch_header import Buffer, batch_fields

if TYPE_CHECKING:
    from vdl_broker.log.segment import Segment
    from vdl_broker.log.stream_log import StreamLog

_DATA = int(EntryType.DATA)
_READ_SLACK = 64 << 10  # read ahead past max_bytes: a batch may straddle the budget
_SCAN_CHUNK = 64 << 10


@dataclass
class ReadResult:
    buffers: list[Buffer]
    first_offset: int
    next_offset: int

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.buffers)


def read_entries(log: StreamLog, start_index: int, end_index: int, max_bytes: int | None) -> list[Entry]:
    if start_index < log.first_index or end_index > log.last_index + 1 or start_index > end_index:
        raise IndexOutOfRange(f"entries [{start_index}, {end_index}) outside "
                              f"[{log.first_index}, {log.last_index + 1})")
    out: list[Entry] = []
    repaired: set[Segment] = set()
    budget = max_bytes if max_bytes is not None else 1 << 62
    index = start_index
    cache = log.cache
    cache_first = cache.first_index
    while index < end_index:
        if cache_first is not None and index >= cache_first:
            cache.read_entries(out, index, end_index, budget)
            return out
        i = log._segment_for_index(index)
        segment = log._ensure_loaded(i)
        stop = min(end_index, segment.last_index + 1)
        if cache_first is not None:
            stop = min(stop, max(cache_first, index + 1))
        first = index - segment.base_index
        start_position = segment.position_of(index)  # checked against the entry there
        positions = segment.ridx.positions
        last = stop - segment.base_index  # exclusive record number
        end_position = positions[last] if last < len(positions) else segment.size
        if end_position - start_position > budget:
            k = bisect_right(positions, start_position + budget, first + 1, last) - 1
            if k <= first:
                if out:
                    return out
                k = first + 1
            last = k
            end_position = positions[last] if last < len(positions) else segment.size
        try:
            entries = [Entry(entry_index, term, EntryType(entry_type), payload, crc=crc) for _, entry_type, term,
                       entry_index, payload, crc in segment.iter_entries(start_position, end_position)]
        except (ValueError, struct.error):
            entries = []
        stop_index = segment.base_index + last
        # Walked by header lengths from a checked start: the right count and end index mean
        # every entry in between is the right one.
        if len(entries) != stop_index - index or (entries and entries[-1].index != stop_index - 1):
            # A Raft index record past the first is damaged: rebuild the indexes, read again.
            if segment in repaired:
                raise ValueError(f"{segment.log_path}: entries [{index}, {stop_index}) unreadable")
            repaired.add(segment)
            segment.repair_indexes(f"entries [{index}, {stop_index}) not where the index says")
            continue
        out += entries
        budget -= end_position - start_position
        index = segment.base_index + last
        if budget <= 0:
            break
    return out


def read_batches(log: StreamLog, offset: int, max_bytes: int, max_offset: int | None) -> ReadResult:
    start, end = log.log_start_offset, log.log_end_offset
    if offset < start or offset > end:
        raise OffsetOutOfRange(f"offset {offset} outside [{start}, {end}]")
    limit = end if max_offset is None else min(max_offset, end)
    buffers: list[Buffer] = []
    first_offset = -1
    next_offset = offset
    total = 0
    visited = (-1, -1)
    segments = log._segments
    while next_offset < limit:
        cache_first = log.cache.first_offset
        if cache_first is not None and next_offset >= cache_first:
            first_cached, next_offset = log.cache.read_batches(buffers, next_offset, limit, max_bytes - total)
            if first_offset < 0:
                first_offset = first_cached
            break
        i = log._segment_for_offset(next_offset)
        if (i, next_offset) == visited:
            break  # no progress (inconsistent segment offsets): never spin
        visited = (i, next_offset)
        segment = log._ensure_loaded(i)
        chunk = max(max_bytes - total, 0) + 2 * log.config.index_interval_bytes + _READ_SLACK
        done = False
        position = segment.position_for_offset(next_offset)
        for _, entry_type, _, _, payload, _ in segment.iter_entries(position, chunk=chunk):
            if entry_type != _DATA:
                continue
            fields = batch_fields(payload)
            if fields.last_offset < next_offset:
                continue
            if fields.last_offset >= limit or (buffers and total + len(payload) > max_bytes):
                done = True
                break
            if first_offset < 0:
                first_offset = fields.base_offset
            buffers.append(payload)
            total += len(payload)
            next_offset = fields.last_offset + 1
            if cache_first is not None and next_offset >= cache_first:
                break  # the rest is in memory
        if done:
            break
        if cache_first is not None and next_offset >= cache_first:
            continue  # the rest comes from the tail cache
        if i == len(segments) - 1:
            break
        next_offset = max(next_offset, segments[i + 1].base_offset)
    return ReadResult(buffers, offset if first_offset < 0 else first_offset, next_offset)


def offset_for_index(log: StreamLog, raft_index: int) -> int:
    if raft_index == log.first_index - 1:
        return log.log_start_offset
    log._check_index(raft_index)
    if raft_index == log.last_index:
        return log.log_end_offset
    cached = log.cache.end_offset_at(raft_index)
    if cached is not None:
        return cached
    segment = log._ensure_loaded(log._segment_for_index(raft_index))
    for _, entry_type, _, index, payload, _ in segment.iter_entries(segment.position_of(raft_index),
                                                                 chunk=_SCAN_CHUNK):
        if entry_type == _DATA:
            fields = batch_fields(payload)
            return fields.last_offset + 1 if index == raft_index else fields.base_offset
    return segment.next_offset


def index_for_offset(log: StreamLog, offset: int) -> int:
    if offset < log.log_start_offset or offset >= log.log_end_offset:
        raise OffsetOutOfRange(f"offset {offset} outside [{log.log_start_offset}, {log.log_end_offset})")
    cache_first = log.cache.first_offset
    if cache_first is not None and offset >= cache_first:
        return log.cache.index_for_offset(offset)
    segment = log._ensure_loaded(log._segment_for_offset(offset))
    for _, entry_type, _, index, payload, _ in segment.iter_entries(segment.position_for_offset(offset),
                                                                 chunk=_SCAN_CHUNK):
        if entry_type == _DATA and batch_fields(payload).last_offset >= offset:
            return index
    raise OffsetOutOfRange(f"offset {offset} not found")  # pragma: no cover - index damage


def offset_for_timestamp(log: StreamLog, timestamp_ms: int) -> tuple[int, int] | None:
    for i in range(log.segment_count):
        segment = ensure_loaded(log._segments, i)  # its max timestamp first: most are passed over
        if not segment.has_data or segment.max_timestamp < timestamp_ms:
            continue
        segment.check_mapped_indexes()
        times = segment.trusted_time_index()
        k = times.scan_start(timestamp_ms)
        position = times.positions[k] if k >= 0 else 0
        if k == len(times) - 1 and len(segment.oidx):
            position = max(position, segment.oidx.positions[-1])
        for _, entry_type, _, _, payload, _ in segment.iter_entries(position, chunk=_SCAN_CHUNK):
            if entry_type == _DATA:
                fields = batch_fields(payload)
                if fields.max_timestamp >= timestamp_ms:
                    return fields.base_offset, fields.max_timestamp
    return None
