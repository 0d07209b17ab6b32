"""Which whole segments retention may delete (Kafka's retention.ms / retention.bytes, seed 002).

Oldest first, never past `max_index` (entries the layer above still needs, e.g. not yet
applied). The active segment too, as in Kafka, once every segment before it goes and it holds
records: a stream whose every record expired keeps none (the caller rolls the log first, so it
keeps an empty active segment; Kafka: UnifiedLog.deletableSegments, deleteSegments rolls).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class _SegmentLike(Protocol):
    @property
    def size(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...

    @property
    def last_index(self) -> int: ...

    @property
    def has_data(self) -> bool: ...


_Segment = TypeVar("_Segment", bound=_SegmentLike)


def segments_to_delete(segments: Sequence[_Segment], now_ms: int, retention_ms: int,
                       retention_bytes: int, max_index: int | None = None,
                       prepare: Callable[[_Segment], object] | None = None) -> int:
    """How many of the oldest segments to delete (`prepare` loads a segment before it is judged);
    all of them when the active one goes too."""
    total = sum(s.size for s in segments)
    count = 0
    for position, segment in enumerate(segments):
        # an active segment without records (Raft's own entries at most) stays: nothing to expire
        if position == len(segments) - 1 and not segment.has_data:
            break
        if prepare is not None:
            prepare(segment)
        if max_index is not None and segment.last_index > max_index:
            break
        # Kafka: a segment expires when its newest record is older than retention.ms
        expired = retention_ms >= 0 and segment.max_timestamp < now_ms - retention_ms
        # Kafka: delete while the log would still be at least retention.bytes without it
        too_big = retention_bytes >= 0 and total - segment.size >= retention_bytes
        if not (expired or too_big):
            break
        total -= segment.size
        count += 1
    return count
