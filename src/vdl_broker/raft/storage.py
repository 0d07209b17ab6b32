"""The read-only view of durable storage the core needs, and an in-memory implementation.

The core never writes storage: the driver writes what a Ready says (and only then calls
advance()). StreamLogStorage (log_storage.py) satisfies this Protocol over a StreamLog, whose
entries are the core's entries; it answers term_at(first_index - 1) with the reset/snapshot term.
"""

from __future__ import annotations

from typing import Protocol

from vdl_broker.raft.types import CompactedError, ConfigRecord, Entry, HardState, SnapshotMeta


class RaftStorage(Protocol):
    """Durable (synced) log state. An empty, fresh log has first_index 1, last_index 0, term_at(0) 0."""

    @property
    def first_index(self) -> int:
        """Index of the first stored entry; first_index - 1 is the log's start point."""
        ...

    @property
    def last_index(self) -> int:
        """Index of the last stored entry (first_index - 1 when empty)."""
        ...

    def term_at(self, index: int) -> int:
        """Term of entry `index` for first_index - 1 <= index <= last_index."""
        ...

    def entries(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [start, end) with first_index <= start < end <= last_index + 1; stops once
        max_bytes of payload is reached but always returns at least one entry."""
        ...


def entry_size(entry: Entry) -> int:
    return len(entry.data)


def limit_size(entries: list[Entry], max_bytes: int | None, at_least_one: bool = True) -> list[Entry]:
    """Longest prefix within max_bytes of payload (at least one entry unless told otherwise)."""
    if max_bytes is None or (at_least_one and len(entries) <= 1):
        return entries
    total = 0
    for i, entry in enumerate(entries):
        total += len(entry.data)
        if total > max_bytes and (i > 0 or not at_least_one):
            return entries[:i]
    return entries


class MemoryStorage:
    """An in-memory RaftStorage plus the write operations a driver performs (tests, simulation)."""

    def __init__(self) -> None:
        self._start = SnapshotMeta(0, 0)
        self._entries: list[Entry] = []
        self.hard_state = HardState()
        self.membership: list[ConfigRecord] = []  # the driver's saved configuration records

    @property
    def first_index(self) -> int:
        return self._start.index + 1

    @property
    def last_index(self) -> int:
        return self._start.index + len(self._entries)

    @property
    def start(self) -> SnapshotMeta:
        return self._start

    def term_at(self, index: int) -> int:
        if index == self._start.index:
            return self._start.term
        if index < self._start.index:
            raise CompactedError(f"index {index} precedes the log start {self._start.index + 1}")
        if index > self.last_index:
            raise IndexError(f"index {index} beyond last index {self.last_index}")
        return self._entries[index - self._start.index - 1].term

    def entries(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        if start <= self._start.index:
            raise CompactedError(f"index {start} precedes the log start {self._start.index + 1}")
        if end > self.last_index + 1:
            raise IndexError(f"end {end} beyond last index {self.last_index}")
        offset = self._start.index + 1
        return limit_size(self._entries[start - offset : end - offset], max_bytes)

    # --- writes (the driver's side) ---

    def append(self, entries: list[Entry]) -> None:
        """Truncate at entries[0].index if needed, then append (what a driver does with a Ready)."""
        if not entries:
            return
        first = entries[0].index
        if first <= self._start.index or first > self.last_index + 1:
            raise ValueError(f"append at {first} outside [{self._start.index + 1}, {self.last_index + 1}]")
        del self._entries[first - self._start.index - 1 :]
        self._entries.extend(entries)

    def truncate_suffix(self, from_index: int) -> None:
        """Drop entries >= from_index (simulated storage damage; StreamLog.truncate_suffix)."""
        if from_index <= self._start.index:
            raise ValueError(f"cannot truncate from {from_index} at or below the log start {self._start.index}")
        del self._entries[from_index - self._start.index - 1 :]

    def reset(self, start: SnapshotMeta) -> None:
        """Drop everything; the log now starts after `start` (StreamLog.reset)."""
        self._start = start
        self._entries = []

    def compact(self, first_index: int) -> None:
        """Retention: drop entries before first_index (must be <= last_index + 1)."""
        if first_index <= self.first_index:
            return
        if first_index > self.last_index + 1:
            raise ValueError("cannot compact beyond the last index")
        term = self.term_at(first_index - 1)
        del self._entries[: first_index - self.first_index]
        self._start = SnapshotMeta(first_index - 1, term, self._start.data)

    def all_entries(self) -> list[Entry]:
        return list(self._entries)
