"""Snapshots of a RaftGroup's state machine (the metadata group's), so its log does not grow with
history and a restart replays only what follows the last snapshot. A part of RaftGroup
(group_state.py); a group without a StateMachine (a stream: its log is its state) has none.

- Taking one: after applying, once RaftConfig.snapshot_entries entries or snapshot_bytes of
  payload were applied since the last snapshot, the state machine's bytes (StateMachine.snapshot,
  on the event loop: the state exactly after the last applied entry) are written to a snapshot
  file in a worker thread (raft/snapshots.py: synced, atomic).
- Truncating behind it: once written, the core sees the log start after the snapshot (the
  storage's floor: StreamLogStorage.compact_to) and the segments wholly at or before it are
  deleted -- only while `may_truncate()` says so (an older release replays its metadata log from
  the start: a cluster that may still roll back keeps it whole).
- A restart restores the latest snapshot and replays the entries after it.
- A follower too far behind (the entries it needs are behind the floor) gets the latest snapshot
  from its leader (a Raft SNAPSHOT message carrying it, paced by the node's catch-up throttle):
  it writes the file, restores the state machine from it, then resets its log after it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
from typing import Protocol

from vdl_broker.raft.group_state import GroupState
from vdl_broker.raft.snapshots import Snapshot
from vdl_broker.raft.types import Entry, SnapshotMeta

log = logging.getLogger(__name__)


class StateMachine(Protocol):
    def snapshot(self) -> bytes:
        """The whole state after the last entry applied, as bytes."""
        ...

    def restore(self, data: bytes, index: int) -> None:
        """Replace the whole state by the snapshot `data` taken after entry `index`."""
        ...


class Snapshotting(GroupState):
    def _restore_latest(self) -> int:
        """At start: the latest snapshot restored (its index: the entries up to it are applied),
        or 0."""
        if self._machine is None or self._snapshots is None:
            return 0
        latest = self._snapshots.latest()
        if latest is None or latest.index > self.log.last_index or latest.index < self.log.first_index - 1:
            return 0  # a log reset past it (the leader's newer snapshot is on its way), or none
        self._machine.restore(latest.data, latest.index)
        self._latest = latest
        if self._may_truncate():  # else the log stays whole for the core too: no InstallSnapshot
            self.storage.compact_to(latest.index)
        return latest.index

    def _count_applied(self, entries: list[Entry]) -> None:
        if self._machine is None:
            return
        self._since_entries += len(entries)
        self._since_bytes += sum(len(entry.data) for entry in entries)
        cfg = self.config
        due = ((cfg.snapshot_entries and self._since_entries >= cfg.snapshot_entries)
               or (cfg.snapshot_bytes and self._since_bytes >= cfg.snapshot_bytes))
        if not due or (self._snapshotting is not None and not self._snapshotting.done()):
            return
        index = entries[-1].index
        term = self.node.log.term(index)
        if term is None:
            return
        self._since_entries = self._since_bytes = 0
        snapshot = Snapshot(index, term, self._machine.snapshot())
        self._snapshotting = asyncio.get_running_loop().create_task(self._write_snapshot(snapshot),
                                                                     name=f"snapshot:{self.name}")

    async def _write_snapshot(self, snapshot: Snapshot) -> None:
        assert self._snapshots is not None
        try:
            await asyncio.to_thread(self._snapshots.save, snapshot)
        except OSError as error:  # a full disk: the log keeps everything, a later one tries again
            log.warning("raft group %s: cannot write a snapshot at index %d (%s)", self.name, snapshot.index, error)
            return
        self._latest = snapshot
        if not self._may_truncate() or self._stopped:
            return
        self.storage.compact_to(snapshot.index)
        # On the event loop, as retention deletes segments: the log's segment list and tail cache
        # are the loop's (its appends and reads run there), and a worker thread changing them
        # raced with a read of the cache (entries moved under it). Only file deletions and the
        # log start's small write are done here, once per snapshot.
        deleted = self.log.delete_through(snapshot.index)
        log.info("raft group %s: snapshot at index %d (%d bytes); %d log segment(s) behind it deleted", self.name,
                 snapshot.index, len(snapshot.data), deleted)

    def _snapshot_to_send(self, meta: SnapshotMeta) -> SnapshotMeta:
        """A leader's SNAPSHOT message for a follower behind the floor: the latest snapshot and
        where the follower's log starts after it."""
        latest = self._latest
        if latest is None or latest.index < meta.index:
            return dataclasses.replace(meta, data=self.log.offset_for_index(meta.index))
        data = {"start_offset": self.log.offset_for_index(latest.index),
                "state": base64.b64encode(latest.data).decode()}
        return SnapshotMeta(latest.index, latest.term, data, self.node.membership.conf_at(latest.index))

    def _install_snapshot(self, meta: SnapshotMeta) -> None:
        """A follower, before its log is reset after `meta`: the snapshot written and the state
        machine restored from it (a crash in between restarts from the file)."""
        if self._machine is None or self._snapshots is None or not isinstance(meta.data, dict) \
                or "state" not in meta.data:
            return
        snapshot = Snapshot(meta.index, meta.term, base64.b64decode(meta.data["state"]))
        self._snapshots.save(snapshot)
        self._machine.restore(snapshot.data, snapshot.index)
        self._latest = snapshot
        self._since_entries = self._since_bytes = 0
