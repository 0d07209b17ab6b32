"""The Ready loop of a RaftGroup: carries out the core's Ready bundles one at a time, in the
contract's order (vdl_broker.raft): save the configuration records, install a snapshot
(StreamLog.reset), truncate/append entries, save the hard state, `await log.sync()`, send,
apply, advance. A part of RaftGroup (group_state.py).

Throughput comes from batching, not from overlapping Readys: everything proposed or received
while one Ready is being synced lands in the next one, so a single fdatasync covers every
proposal that arrived meanwhile (group commit).

Three refinements of the order:
- Committed entries are applied right after the append, before this Ready's sync: they are
  durable on a majority already, and the sync concerns only this Ready's new entries (saves one
  fsync of latency per commit; etcd's server does the same).
- The leader's own messages (APPEND, HEARTBEAT, SNAPSHOT, TIMEOUT_NOW) leave *before* its local
  sync, so followers persist in parallel with the leader (thesis §10.2.1). This is safe: they
  acknowledge nothing, the leader's term and vote were made durable when it campaigned, and the
  core counts the leader's own match only at advance(), i.e. after its sync.
- Everything else (APPEND_RESPONSE, votes) leaves only after the sync: a follower acknowledges
  only durable entries, a vote only after the durable term/vote.

A write that fails with a storage error (a full disk, ...) is undone (write_failure.py); any
other exception stops the group (`failure`), and its owner is told (`on_failure`: a stream's
replica opens again, the metadata group stops the node).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vdl_broker.raft.group_state import GroupState
from vdl_broker.raft.persistence import save_hard_state, save_membership
from vdl_broker.raft.proposals import GroupStoppedError
from vdl_broker.raft.types import (
    ConfigRecord,
    Entry,
    Message,
    MessageType,
    RaftError,
    Ready,
    Role,
    SnapshotMeta,
)
from vdl_broker.raft.write_failure import WriteFailed, is_storage_error

if TYPE_CHECKING:
    from vdl_broker.raft.group import RaftGroup

log = logging.getLogger(__name__)

# The leader's messages: they acknowledge nothing, so they may leave before the leader's sync.
_EARLY = frozenset({MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT, MessageType.TIMEOUT_NOW})
_CARRIES_COMMIT = frozenset({MessageType.APPEND, MessageType.HEARTBEAT})  # the leader's commit index


class ReadyLoop(GroupState):
    async def _run(self) -> None:
        node = self.node
        try:
            while not self._stopped:
                if not node.has_ready():
                    self._wake.clear()
                    if not node.has_ready():
                        await self._wake.wait()
                    continue
                rd = node.ready()
                try:
                    await self._handle_ready(rd)
                except WriteFailed as failed:
                    await self._drop_unsynced_tail()
                    self._write_failed(rd, failed)
                    node = self.node  # a restart replaced the core
                    self._poke()
                    self._proposals.role_changed(node.role, node.term, node.leader_id)
                    self._role_changed()
                    self._notify_change()
                    continue
                if self.write_failing and (rd.entries or rd.hard_state is not None):
                    self.write_failing = False
                    log.warning("raft group %s on node %d: writes succeed again", self.name, self.node_id)
                node.advance(rd)
                if node.quiescent and self._commit_point:
                    # Quiet groups are not ticked: a follower told to go quiet by its leader's
                    # message, or one applying after that, saves its commit point here instead.
                    self._save_commit_point_soon()
                if self.log.damage is not None and not node.recovering:
                    await asyncio.to_thread(self.log.clear_damage)  # the lost range is back
                self._proposals.role_changed(node.role, node.term, node.leader_id)
                if rd.soft_state is not None:
                    self._role_changed()
                self._notify_change()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a storage failure: stop this group, loudly
            log.exception("raft group %s on node %d failed", self.name, self.node_id)
            self.failure = error
            self._stopped = True
            self._proposals.fail_all(GroupStoppedError(f"raft group {self.name} failed: {error}"))
            self._notify_change()
            if self._on_failure is not None:
                self._on_failure(error)

    async def _handle_ready(self, rd: Ready) -> None:
        stream_log = self.log
        if rd.membership is not None:
            # Before the entries they describe: every saved CONFIG entry then has its record.
            # The union keeps records of entries a conflict is about to cut until that cut is
            # durable (the exact list is saved after the sync); at the next start, records the
            # log does not back are dropped (RaftNode checks them).
            union = {(r.index, r.term): r for r in self._durable_membership}
            union.update({(r.index, r.term): r for r in rd.membership})
            records = sorted(union.values(), key=lambda r: (r.index, r.term))
            await self._save_membership(rd, records)
        if rd.snapshot is not None:
            snap = rd.snapshot
            self._install_snapshot(snap)  # a state machine's snapshot: written and restored first
            reset = functools.partial(stream_log.reset, snap.index + 1, snap.term, _snapshot_offset(snap))
            await self._until_written(reset, "start its log where the leader's starts")
            if self._snapshot_fn is not None:
                self._snapshot_fn(snap)
        if rd.entries:
            first = rd.entries[0].index
            if first <= stream_log.last_index:
                # Raft conflict: the leader's entries win.
                cut = functools.partial(stream_log.truncate_suffix, first)
                await self._until_written(cut, "cut its conflicting entries")
            try:
                stream_log.append(rd.entries)  # all or nothing
            except OSError as error:
                if not is_storage_error(error):
                    raise
                raise WriteFailed(error, applied=False, hard_state_saved=rd.hard_state is None) from error
        # Committed entries are durable on a majority already and (appended above) readable
        # here: apply them now rather than after this Ready's own fsync, which would add one
        # sync to every commit's latency (etcd applies concurrently with its WAL write too).
        # Before any message leaves: a follower learns a commit index only once the leader has
        # applied it (see _send), so no follower's high watermark is ever ahead of the leader's.
        if rd.committed_entries:
            self._apply(rd.committed_entries)
        applied = bool(rd.committed_entries)
        # The core splits off the messages allowed to leave before the sync (Ready.early_messages,
        # leader messages of a durable term); belt and braces: only leader message types leave
        # early here, whatever the core says.
        late: list[Message] = []
        for message in rd.early_messages:
            if message.type in _EARLY:
                self._send(message)
            else:
                late.append(message)
        late += rd.messages
        hard_state_saved = rd.hard_state is None
        try:
            if rd.hard_state is not None:
                await asyncio.to_thread(save_hard_state, stream_log.directory, rd.hard_state)
                hard_state_saved = True
            if rd.entries or rd.snapshot is not None:
                await stream_log.sync()
        except OSError as error:
            if not is_storage_error(error):
                raise
            raise WriteFailed(error, applied, hard_state_saved) from error
        if rd.entries or rd.snapshot is not None:
            self._proposals.durable_through(stream_log.durable_index)
        if rd.membership is not None and rd.membership != self._durable_membership:
            await self._save_membership(rd, rd.membership, applied=applied)
        for message in late:
            self._send(message)

    async def _save_membership(self, rd: Ready, records: list[ConfigRecord], applied: bool = False) -> None:
        try:
            await asyncio.to_thread(save_membership, self.log.directory, records)
        except OSError as error:
            if not is_storage_error(error):
                raise
            raise WriteFailed(error, applied, rd.hard_state is None) from error
        self._durable_membership = list(records)

    def _send(self, message: Message) -> None:
        if message.type in _CARRIES_COMMIT and message.commit > (applied := self.applied_through):
            # The core tells followers its commit index, which may run ahead of what this node
            # has applied (a Ready applies at most max_committed_bytes). Followers serve reads up
            # to the commit point they learn (KIP-392), so they learn only what the leader
            # applied: a follower's high watermark never passes the leader's. Telling less of
            # the commit is always safe in Raft (it only delays the followers' apply).
            message.commit = applied
        if message.type == MessageType.SNAPSHOT and message.snapshot is not None and message.snapshot.data is None:
            # The follower's log will start after it, at our log's position there (and with the
            # state machine's snapshot, if this group has one: snapshotting.py).
            message.snapshot = self._snapshot_to_send(message.snapshot)
            if isinstance(message.snapshot.data, dict):
                self._send_paced(message)
                return
        if message.type == MessageType.APPEND and message.entries and self._catching_up(message.to):
            self._send_paced(message)
            return
        self._send_fn(self.name, message)

    def _send_paced(self, message: Message) -> None:
        """Through the node's catch-up throttle: held back until it leaves (paced_left), so the
        core does not take a heartbeat answer that overtook it for its loss."""
        node = self.node
        node.message_held(message)
        if not self._send_catchup(self.name, message):
            node.message_left(message)  # dropped (a full queue): lost, the next heartbeat resends

    def paced_left(self, message: Message) -> None:
        """The throttle sent `message` (RaftHost)."""
        self.node.message_left(message)

    def paced_obsolete(self, message: Message) -> bool:
        """Whether a catch-up message still waiting is pointless now (RaftHost, throttle.py): the
        leader that sent it stepped down, or the follower acknowledged its entries meanwhile."""
        node = self.node
        if self._stopped or node.role != Role.LEADER or message.term != node.term:
            return True
        if message.type == MessageType.APPEND and message.entries:
            return node.match_index(message.to) >= message.entries[-1].index
        return False

    def _apply(self, entries: list[Entry]) -> None:
        if entries[0].index <= self._applied_floor:
            # Applied before a core restart (a failed write): committed entries never change.
            entries = [entry for entry in entries if entry.index > self._applied_floor]
            if not entries:
                return
        if self._apply_fn is not None:
            self._apply_fn(entries)
        self._count_applied(entries)
        self._applied_through = max(self._applied_through, entries[-1].index)
        self._proposals.applied(entries, self.node.leader_id)
        self._call(self._commit_listeners, "commit")
        # wait_for's waiters look at applied state: they go on now, not after this Ready's sync
        # of the new entries it may also carry (a follower learns a commit from the next append).
        self._notify_change()

    def _role_changed(self) -> None:
        leading = self.node.role == Role.LEADER
        if leading and not self._leading:
            self.elections_won += 1
            self._leader_since = self._clock()
        self._leading = leading
        self._call(self._role_listeners, "role")

    def _call(self, listeners: list[Callable[[RaftGroup], None]], kind: str) -> None:
        for listener in listeners:
            try:
                listener(self)  # type: ignore[arg-type]  # self is the RaftGroup
            except Exception:
                log.exception("%s listener of raft group %s failed", kind, self.name)

    if TYPE_CHECKING:
        def _catching_up(self, peer: int) -> bool: ...  # lease.py

        def _install_snapshot(self, meta: SnapshotMeta) -> None: ...  # snapshotting.py

        def _snapshot_to_send(self, meta: SnapshotMeta) -> SnapshotMeta: ...  # snapshotting.py

        def _count_applied(self, entries: list[Entry]) -> None: ...  # snapshotting.py

        async def _drop_unsynced_tail(self) -> None: ...  # write_failure.py

        async def _until_written(self, write: Callable[[], None], what: str) -> None: ...  # write_failure.py

        def _write_failed(self, rd: Ready, failed: WriteFailed) -> None: ...  # write_failure.py


def _snapshot_offset(snap: SnapshotMeta) -> int:
    data: Any = snap.data
    if isinstance(data, dict):
        data = data.get("start_offset")
    if not isinstance(data, int) or isinstance(data, bool) or data < 0:
        raise RaftError(f"snapshot at index {snap.index} carries no start offset: {snap.data!r}")
    return data
