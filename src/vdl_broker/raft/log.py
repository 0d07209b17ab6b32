"""The core's view of the log: durable storage plus not-yet-persisted ("unstable") entries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vdl_broker.raft.storage import RaftStorage, limit_size
from vdl_broker.raft.types import CompactedError, Entry, SnapshotMeta

if TYPE_CHECKING:
    from vdl_broker.raft.membership import Membership


class RaftLog:
    """storage[first..] overlaid by unstable entries from `offset` on (unstable wins).

    A pending snapshot (a log reset received from the leader) hides everything in storage until
    the driver has installed it."""

    def __init__(self, storage: RaftStorage, applied: int = 0) -> None:
        self.storage = storage
        self.unstable: list[Entry] = []
        self.offset = storage.last_index + 1  # index of unstable[0]
        self.pending_snapshot: SnapshotMeta | None = None
        start = storage.first_index - 1
        # Everything up to the log start is committed (only committed entries are compacted).
        self.committed = max(start, min(applied, storage.last_index))
        self.applied = self.committed
        self.membership: Membership | None = None  # told of every append and reset

    # --- reads ---

    def first_index(self) -> int:
        if self.pending_snapshot is not None:
            return self.pending_snapshot.index + 1
        return self.storage.first_index

    def last_index(self) -> int:
        if self.unstable:
            return self.offset + len(self.unstable) - 1
        if self.pending_snapshot is not None:
            return self.pending_snapshot.index
        return self.storage.last_index

    def last_term(self) -> int:
        term = self.term(self.last_index())
        assert term is not None
        return term

    def term(self, index: int) -> int | None:
        """Term at index, or None if compacted or beyond the end."""
        if index >= self.offset:
            pos = index - self.offset
            return self.unstable[pos].term if pos < len(self.unstable) else None
        snap = self.pending_snapshot
        if snap is not None:
            return snap.term if index == snap.index else None
        if index < self.storage.first_index - 1 or index > self.storage.last_index:
            return None
        return self.storage.term_at(index)

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: the candidate's log is at least as up-to-date as ours."""
        our_term = self.last_term()
        return last_term > our_term or (last_term == our_term and last_index >= self.last_index())

    def entries(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [start, end) (end clipped to last+1); raises CompactedError below the start."""
        end = min(end, self.last_index() + 1)
        if start >= end:
            return []
        if start < self.first_index():
            raise CompactedError(f"entry {start} is compacted (log starts at {self.first_index()})")
        if start >= self.offset:
            return limit_size(self.unstable[start - self.offset : end - self.offset], max_bytes)
        stop = min(end, self.offset)
        result = self.storage.entries(start, stop, max_bytes)
        if end <= self.offset or len(result) < stop - start:
            return result
        tail = self.unstable[: end - self.offset]
        if max_bytes is not None:
            remaining = max_bytes - sum(len(e.data) for e in result)
            if remaining < 0:
                return result
            tail = limit_size(tail, remaining, at_least_one=False)
        return result + tail

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """Largest (i, term(i)) with i <= index and term(i) <= term (etcd's fast backtracking).

        Returns (i, 0) when term(i) is unknown (compacted): the caller probes from there."""
        while index > 0:
            our = self.term(index)
            if our is None:
                return index, 0
            if our <= term:
                return index, our
            index -= 1
        return 0, 0

    def find_conflict(self, entries: list[Entry] | tuple[Entry, ...]) -> int:
        """Index of the first entry that is new or conflicts with ours (0 if all present)."""
        for entry in entries:
            if not self.match_term(entry.index, entry.term):
                return entry.index
        return 0

    # --- writes ---

    def append(self, entries: list[Entry]) -> None:
        """Add entries (truncating any suffix from entries[0].index on)."""
        if not entries:
            return
        if self.membership is not None:
            self.membership.on_append(entries)
        after = entries[0].index
        if after == self.offset + len(self.unstable):
            self.unstable.extend(entries)
        elif after <= self.offset:
            # Replaces stored entries too: the driver truncates storage when persisting.
            self.offset = after
            self.unstable = list(entries)
        else:
            del self.unstable[after - self.offset :]
            self.unstable.extend(entries)

    def maybe_append(self, prev_index: int, prev_term: int, commit: int, entries: list[Entry]) -> int | None:
        """Follower side of AppendEntries: the new last index, or None on a log mismatch."""
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        if prev_index == self.last_index():
            conflict = entries[0].index if entries else 0  # the common case: appending at our tail
        else:
            conflict = self.find_conflict(entries)
        if conflict:
            if conflict <= self.committed:
                raise AssertionError(f"entry {conflict} conflicts with committed entry (commit {self.committed})")
            self.append(list(entries[conflict - prev_index - 1 :]))
        self.commit_to(min(commit, last_new))
        return last_new

    def commit_to(self, index: int) -> None:
        if index > self.committed:
            if index > self.last_index():
                raise AssertionError(f"commit {index} beyond last index {self.last_index()}")
            self.committed = index

    def restore(self, snap: SnapshotMeta) -> None:
        """Follower: the leader's log starts after snap; drop everything we have."""
        self.pending_snapshot = snap
        self.unstable = []
        if self.membership is not None:
            self.membership.on_restore(snap)
        self.offset = snap.index + 1
        self.committed = snap.index

    # --- driver acknowledgements ---

    def stable_to(self, index: int, term: int) -> None:
        """Entries up to index (with that term) are durable: drop them from the unstable list."""
        if not self.unstable or index < self.offset:
            return
        if self.term(index) != term:
            return  # replaced while the driver was persisting: it will get the new ones
        del self.unstable[: index + 1 - self.offset]
        self.offset = index + 1

    def discard_unstable(self) -> list[Entry]:
        """Forget every entry not yet persisted (the driver could not write them); returns them.
        Only safe where no other node can hold them: see vdl_broker.raft.group."""
        dropped, self.unstable = self.unstable, []
        if dropped and self.membership is not None:
            self.membership.truncate_from(dropped[0].index)
        return dropped

    def snapshot_installed(self, snap: SnapshotMeta) -> None:
        if self.pending_snapshot is snap:
            self.pending_snapshot = None

    def applied_to(self, index: int) -> None:
        if index > self.applied:
            self.applied = index
