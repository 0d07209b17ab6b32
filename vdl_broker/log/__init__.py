"""Log storage: Raft-entry segments, three indexes, recovery, retention, tail cache."""

from vdl_broker.log.config import LogConfig
from vdl_broker.log.entry import Entry, EntryType, IndexOutOfRange, OffsetOutOfRange
from vdl_broker.log.hard_state import HardState, load_hard_state, save_hard_state
from vdl_broker.log.stream_log import ReadResult, StreamLog

__all__ = [
    "Entry",
    "EntryType",
    "HardState",
    "IndexOutOfRange",
    "LogConfig",
    "OffsetOutOfRange",
    "ReadResult",
    "StreamLog",
    "load_hard_state",
    "save_hard_state",
]
