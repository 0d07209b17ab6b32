"""Log storage: Raft-entry segments, three indexes, recovery, retention, tail cache.

Raft's own small files (hard state, commit point) are kept by vdl_broker.raft.persistence."""

from vdl_broker.log.config import LogConfig
from vdl_broker.log.entry import DamagedEntry, FrozenBuffer, IndexOutOfRange, OffsetOutOfRange
from vdl_broker.log.stream_log import ReadResult, StreamLog

__all__ = [
    "DamagedEntry",
    "FrozenBuffer",
    "IndexOutOfRange",
    "LogConfig",
    "OffsetOutOfRange",
    "ReadResult",
    "StreamLog",
]
