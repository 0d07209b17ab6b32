"""RaftStorage over a StreamLog: the core's read-only view of the durable log.

The core reads; the driver (vdl_broker.raft.group) writes. The core only asks for indexes below
its unstable offset, which the driver has appended to the StreamLog already. The log's entries are
the core's entries, so they pass through unchanged.
"""

from __future__ import annotations

from vdl_broker.log import DamagedEntry, IndexOutOfRange, StreamLog
from vdl_broker.raft.types import CompactedError, Entry


class StreamLogStorage:
    """Satisfies vdl_broker.raft.storage.RaftStorage. With a snapshot (compact_to), the log starts
    after it for the core, whatever segments before it are still on disk."""

    def __init__(self, log: StreamLog) -> None:
        self.log = log
        self._floor = 0  # the latest snapshot's index: the core's log starts after it

    def compact_to(self, index: int) -> None:
        self._floor = max(self._floor, index)

    @property
    def first_index(self) -> int:
        return max(self.log.first_index, self._floor + 1)

    @property
    def last_index(self) -> int:
        return self.log.last_index

    def term_at(self, index: int) -> int:
        first = self.first_index
        if index < first - 1:
            raise CompactedError(f"index {index} precedes the log start {first}")
        try:
            return self.log.term_at(index)
        except DamagedEntry:
            # As entries() below: the group has stopped, and 0 is no entry's term: nothing in
            # the step in progress matches or commits on it.
            return 0

    def entries(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        if start < self.first_index:
            raise CompactedError(f"index {start} precedes the log start {self.first_index}")
        try:
            return self.log.entries(start, end, max_bytes)
        except DamagedEntry:
            # The log told its group, which has stopped (RaftGroup.storage_damaged): nothing of
            # the entry may reach a follower or the state machine, and the core, which may be in
            # the middle of a step, must not fail half-way.
            return []
        except IndexOutOfRange as error:
            if start < self.log.first_index:  # retention ran meanwhile
                raise CompactedError(str(error)) from error
            raise
