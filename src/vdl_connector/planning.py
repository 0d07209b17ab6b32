"""Pure offset planning: ranges per task and read limits (no I/O, runs on the driver).

Mirrors Spark's Kafka source: KafkaOffsetRangeCalculator (minPartitions,
maxRecordsPerPartition) and KafkaMicroBatchStream.rateLimit / delayBatch
(maxOffsetsPerTrigger, minOffsetsPerTrigger + maxTriggerDelay). Follower reads
(preferReplicas): which in-sync replicas each range's task reads from.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

from vdl_connector.options import ReplicaPreference

if TYPE_CHECKING:
    from vdl_client.replicas import ReplicaSet


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records [start, end) of one stream, read by one Spark task."""

    stream: str
    start: int
    end: int
    # A stream found after the query started is read from its beginning: offsets below its log
    # start are then skipped silently instead of being reported as data loss.
    from_earliest: bool = False
    # The stream's Delta table (vdl_connector/tables.py): offsets retention deletes after
    # planning are read from it instead.
    table: str | None = None
    # The replicas to read from, in order (follower reads, KIP-392); the stream's leader, found
    # when reading, is the last resort. Empty: the leader only.
    replicas: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _divide(parts: int, offset_range: OffsetRange) -> list[OffsetRange]:
    """Split a range into `parts` contiguous pieces of near-equal size (none empty)."""
    parts = max(1, min(parts, offset_range.size))
    size, start = offset_range.size, offset_range.start
    bounds = [start + (size * i) // parts for i in range(parts + 1)]
    return [OffsetRange(offset_range.stream, bounds[i], bounds[i + 1]) for i in range(parts)]


def plan_ranges(start: Mapping[str, int], end: Mapping[str, int], min_partitions: int | None = None,
                max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Ranges [start, end) per stream in `end`, split for minPartitions / maxRecordsPerPartition.

    A stream missing from `start` starts at its end (nothing to read): the caller resolves new
    streams' starting offsets before planning. Empty ranges are dropped.
    """
    ranges = [OffsetRange(s, start.get(s, e), e) for s, e in sorted(end.items()) if e > start.get(s, e)]
    return [piece for pieces in split_ranges(ranges, min_partitions, max_records_per_partition) for piece in pieces]


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[list[OffsetRange]]:
    """The pieces of each range (in order) for minPartitions / maxRecordsPerPartition, the ranges
    taken together: minPartitions is shared out in proportion to their sizes, and only when it
    exceeds their number (after maxRecordsPerPartition)."""
    pieces = [[r] for r in ranges]
    if max_records_per_partition:
        pieces = [_divide(math.ceil(r.size / max_records_per_partition), r) for r in ranges]
    count = sum(len(p) for p in pieces)
    if min_partitions and min_partitions > count and count:
        total = sum(r.size for r in ranges)
        pieces = [[piece for r in group for piece in _divide(max(1, round(r.size / total * min_partitions)), r)]
                  for group in pieces]
    return pieces


def spread_over_replicas(ranges: Sequence[InputPartition], placements: Mapping[str, ReplicaSet],
                         preference: ReplicaPreference) -> list[InputPartition]:
    """Give each range the replicas its task reads from: with preferReplicas 'any' the ranges take
    the in-sync replicas in turn (one turn across all streams, so every node gets its share), with
    'rack:<name>' those of that rack; each range then lists the other candidates as fallbacks.
    'leader', a stream without a known placement, or a rack holding none of its in-sync replicas:
    the leader only. Other tasks (a stream's Delta table) are kept as they are."""
    if preference.kind == "leader":
        return list(ranges)
    turn = itertools.count()
    result = []
    for offset_range in ranges:
        if not isinstance(offset_range, OffsetRange):  # another task (a Delta table's) keeps its place
            result.append(offset_range)
            continue
        placement = placements.get(offset_range.stream)
        candidates = [] if placement is None else sorted(
            node for node in placement.in_sync
            if preference.kind == "any" or placement.racks.get(node) == preference.rack)
        if not candidates:
            result.append(offset_range)
            continue
        k = next(turn) % len(candidates)
        result.append(replace(offset_range, replicas=tuple(candidates[k:] + candidates[:k])))
    return result


def rate_limit(limit: int, start: Mapping[str, int], latest: Mapping[str, int]) -> dict[str, int]:
    """maxOffsetsPerTrigger: share `limit` records over streams in proportion to their backlog."""
    sizes = {s: max(0, latest[s] - start.get(s, latest[s])) for s in latest}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    result: dict[str, int] = {}
    for stream, end in latest.items():
        begin = start.get(stream, end)
        share = limit * (sizes[stream] / total)
        # Spark rounds tiny shares up so every stream with a backlog makes progress.
        step = math.ceil(share) if share < 1 else math.floor(share)
        result[stream] = min(end, begin + step)
    return result


def backlog(start: Mapping[str, int], latest: Mapping[str, int]) -> int:
    return sum(max(0, end - start.get(stream, end)) for stream, end in latest.items())


@dataclass
class TriggerDelay:
    """minOffsetsPerTrigger + maxTriggerDelay: hold a batch back until enough records arrived or
    the delay since the last batch ran out (Spark's KafkaMicroBatchStream.delayBatch)."""

    min_rows: int
    max_delay_ms: int
    last_trigger_ms: float

    def should_delay(self, new_rows: int, now_ms: float) -> bool:
        if self.min_rows <= 0 or now_ms - self.last_trigger_ms >= self.max_delay_ms or new_rows >= self.min_rows:
            self.last_trigger_ms = now_ms
            return False
        return True
