"""Which whole segments retention may delete (Kafka's retention.ms / retention.bytes, seed 002).

Oldest first, never the active segment, and never past `max_index` (entries the layer above
still needs, e.g. not yet applied).
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


_Segment = TypeVar("_Segment", bound=_SegmentLike)


def segments_to_delete(segments: Sequence[_Segment], now_ms: int, retention_ms: int,
                       retention_bytes: int, max_index: int | None = None,
                       prepare: Callable[[_Segment], object] | None = None) -> int:
    """How many of the oldest segments to delete (`prepare` loads a segment before it is judged)."""
    total = sum(s.size for s in segments)
    count = 0
    for segment in segments[:-1]:  # the active segment always stays
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
