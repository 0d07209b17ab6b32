"""RaftStorage over a StreamLog (the core's read-only view of the durable log), plus hard state.

The core reads; the driver (vdl_broker.raft.group) writes. The core only asks for indexes below
its unstable offset, which the driver has appended to the StreamLog already.
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from vdl_broker.log import Entry as LogEntry
from vdl_broker.log import EntryType as LogEntryType
from vdl_broker.log import HardState as LogHardState
from vdl_broker.log import IndexOutOfRange, StreamLog, load_hard_state, save_hard_state
from vdl_broker.log.fileio import atomic_write
from vdl_broker.raft.types import NONE, CompactedError, Entry, EntryType, HardState

# The core's and the log's entry types agree value for value (types.EntryType says so).
_TO_RAFT = {int(t): EntryType(int(t)) for t in LogEntryType}
_TO_LOG = {int(t): LogEntryType(int(t)) for t in EntryType}


class StreamLogStorage:
    """Satisfies vdl_broker.raft.storage.RaftStorage."""

    def __init__(self, log: StreamLog) -> None:
        self.log = log

    @property
    def first_index(self) -> int:
        return self.log.first_index

    @property
    def last_index(self) -> int:
        return self.log.last_index

    def term_at(self, index: int) -> int:
        if index < self.log.first_index - 1:
            raise CompactedError(f"index {index} precedes the log start {self.log.first_index}")
        return self.log.term_at(index)

    def entries(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        if start < self.log.first_index:
            raise CompactedError(f"index {start} precedes the log start {self.log.first_index}")
        try:
            stored = self.log.entries(start, end, max_bytes)
        except IndexOutOfRange as error:
            if start < self.log.first_index:  # retention ran meanwhile
                raise CompactedError(str(error)) from error
            raise
        return [Entry(e.index, e.term, _TO_RAFT[int(e.type)], e.payload) for e in stored]


def to_log_entries(entries: list[Entry]) -> list[LogEntry]:
    return [LogEntry(e.index, e.term, _TO_LOG[int(e.type)], e.data) for e in entries]


def load_raft_hard_state(directory: Path) -> HardState:
    state = load_hard_state(directory)
    return HardState(state.term, NONE if state.voted_for is None else state.voted_for)


def save_raft_hard_state(directory: Path, state: HardState) -> None:
    save_hard_state(directory, LogHardState(state.term, None if state.voted_for == NONE else state.voted_for))


COMMIT_POINT_FILE = "commit-point"
_COMMIT_POINT = struct.Struct("<qqI")  # index, term, crc32c of the first 16 bytes


def save_commit_point(directory: Path, index: int, term: int) -> None:
    """Remember that entry (index, term) is committed. Not fsynced: an old or missing file only
    means a longer replay at the next start."""
    body = struct.pack("<qq", index, term)
    atomic_write(Path(directory) / COMMIT_POINT_FILE, body + struct.pack("<I", crc32c.crc32c(body)), durable=False)


def load_commit_point(log: StreamLog) -> int:
    """An index known committed that this log still holds with the same term (0 if none): the
    core may start with it as applied, skipping the replay of everything before it."""
    try:
        data = (Path(log.directory) / COMMIT_POINT_FILE).read_bytes()
    except FileNotFoundError:
        return 0
    if len(data) != _COMMIT_POINT.size:
        return 0
    index, term, crc = _COMMIT_POINT.unpack(data)
    if crc != crc32c.crc32c(data[:16]) or not log.first_index - 1 <= index <= log.last_index:
        return 0
    try:
        return index if log.term_at(index) == term else 0
    except (IndexOutOfRange, ValueError):
        return 0
