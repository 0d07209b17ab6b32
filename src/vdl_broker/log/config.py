"""Per-stream storage settings (Kafka topic-config names in snake_case)."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 24 * 60 * 60 * 1000
# Positions are stored as uint32 in the index files, so a segment must stay below 2 GiB.
MAX_SEGMENT_BYTES = (1 << 31) - 1


@dataclass
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    retention_ms: int = -1  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    index_interval_bytes: int = 4096
    tail_cache_bytes: int = 64 << 20  # memory: payloads and tail_cache.ENTRY_OVERHEAD per entry
    fsync: bool = True
    # The stream's producer state is snapshotted at each segment roll (as Kafka does) and also
    # after this many bytes of batches applied since the last snapshot, so a restart after a
    # crash replays at most about this much of the log into it, not up to a whole segment.
    state_snapshot_bytes: int = 64 << 20
    # Check the segments before the recovery point too when the log opens, not only those after
    # it: a flipped byte in an old sealed segment is found before the node serves or votes with
    # it. Entry by entry once, then against the checksums recorded when it passed (one CRC32C
    # pass over its files per start: log/verified.py). False: trusted unread, as Kafka does.
    verify_on_open: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be in 1..{MAX_SEGMENT_BYTES}, got {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes <= 0:
            raise ValueError(f"index_interval_bytes must be positive, got {self.index_interval_bytes}")
        if self.state_snapshot_bytes <= 0:
            raise ValueError(f"state_snapshot_bytes must be positive, got {self.state_snapshot_bytes}")
        if self.tail_cache_bytes < 0:
            raise ValueError(f"tail_cache_bytes must be >= 0, got {self.tail_cache_bytes}")
