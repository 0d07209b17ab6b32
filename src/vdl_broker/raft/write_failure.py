"""Write-failure recovery of a RaftGroup: a full disk is not a crash. A part of RaftGroup
(group_state.py).

A full disk (ENOSPC, EDQUOT) or an I/O error while writing a Ready's entries, its hard state or
syncing them is not fatal. The log is put back to what is durable (a failed append undoes itself;
after a failed sync or hard-state write, the entries past the durable index are truncated), none
of the Ready's late messages leave (no APPEND_RESPONSE or vote for what is not stored), its
unwritten proposals fail with ProposalStorageError (Kafka: KAFKA_STORAGE_ERROR), and the core
forgets the unwritten entries in one of two ways:

- A single-voter group's leader drops them from the core's unstable log and stays leader in its
  term. Safe because nobody else ever saw them: such a leader sends no entries, counts its own
  match only at advance() (so it never counted them), and commits nothing beyond its durable
  log, so the indexes they took can be proposed again in the same term. It keeps serving reads
  of committed data, with no election (whose hard-state write a full disk might refuse too).
- Every other case (a follower, a candidate, a leader with peers, a failed hard-state write) is
  a restart of this replica in memory: a new core built from the durable log and hard state,
  exactly as after a crash, which Raft tolerates by design. A leader with peers cannot simply
  drop the entries: its APPENDs left before its own sync, so followers may hold them, and
  re-proposing other data at the same (index, term) would break Log Matching. Restarted as a
  follower of its durable term it can never lead that term again (a new election takes a new
  term), so no (index, term) is ever reused; entries the followers hold commit under the next
  leader or are overwritten, as after a leader crash. A follower that cannot write never
  acknowledges (its APPEND_RESPONSE goes out only after a successful sync), so the leader's
  commits rely on the other replicas; every later APPEND retries the write, so writes resume
  once space returns. Entries already applied are not applied twice (`_applied_floor`).

A conflict truncation (the leader's entries replacing this replica's) or a reset to the
leader's log start (a "snapshot") that the disk refuses is tried again until it succeeds, as the
drop of an unsynced tail is: the Ready waits for it. Anything else (a state machine's snapshot
that cannot be installed, an append that could not be undone, any other exception) stops the
group (RaftGroup.failure), which tells its owner (on_failure).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
from collections.abc import Callable

from vdl_broker.raft.group_state import GroupState
from vdl_broker.raft.node import RaftNode
from vdl_broker.raft.persistence import load_raft_state
from vdl_broker.raft.proposals import ProposalStorageError
from vdl_broker.raft.types import Ready, Role

log = logging.getLogger(__name__)

# Write failures a replica survives (the disk fills up, a quota, a failing device): the Ready is
# undone and retried later. Any other error stops the group.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS})


class WriteFailed(Exception):
    """A Ready's entries, hard state or sync failed with one of STORAGE_ERRNOS."""

    def __init__(self, error: OSError, applied: bool, hard_state_saved: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.applied = applied  # the Ready's committed entries were applied already
        self.hard_state_saved = hard_state_saved


def is_storage_error(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in STORAGE_ERRNOS


class WriteFailureRecovery(GroupState):
    async def _drop_unsynced_tail(self) -> None:
        """After a failed write only what is durable stays: entries appended but not synced may
        be lost already (a failed fsync leaves the page cache's copy untrustworthy)."""
        while self.log.last_index > self.log.durable_index:
            cut = functools.partial(self.log.truncate_suffix, self.log.durable_index + 1)
            await self._until_written(cut, "drop its unsynced entries")

    async def _until_written(self, write: Callable[[], None], what: str) -> None:
        """write() -- a cut of the log or its reset to the leader's log start, each safe to repeat
        after a failure -- tried again while the disk refuses it: a full disk while a reader holds
        the pages of a segment being cut (its kept prefix must be copied to a new file), or the
        small files a cut or a reset rewrites. The group must not die of it: it waits for space,
        or for the reader to let go."""
        delay = 0.05
        while True:
            try:
                write()
                return
            except OSError as error:
                if not is_storage_error(error):
                    raise
                log.warning("raft group %s on node %d cannot %s (%s): retrying", self.name, self.node_id, what, error)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 1.0)

    def _write_failed(self, rd: Ready, failed: WriteFailed) -> None:
        """Undo a Ready whose writes failed (see the module docstring for why this is safe)."""
        self.write_failures += 1
        if not self.write_failing:
            self.write_failing = True
            log.warning("raft group %s on node %d cannot write (%s): refusing writes until it can",
                        self.name, self.node_id, failed.error)
        node = self.node
        stream_log = self.log
        if failed.applied:
            self._applied_floor = max(self._applied_floor, rd.committed_entries[-1].index)
        self._applied_floor = max(self._applied_floor, node.applied_index)
        kept = stream_log.last_index  # only what is durable (_drop_unsynced_tail)
        error = ProposalStorageError(node.leader_id, f"raft group {self.name} on node {self.node_id} "
                                     f"cannot write: {failed.error}")
        self._proposals.fail_from(kept + 1, error)
        stays_leader = (len(self.voters) == 1 and node.role == Role.LEADER and failed.hard_state_saved
                        and rd.snapshot is None and node.log.offset - 1 == kept)
        if stays_leader:
            if not failed.applied and rd.committed_entries:
                # Committed means durable here (a single voter counts only its synced entries).
                self._apply(rd.committed_entries)
            node.log.discard_unstable()
            node.advance(rd)
            return
        applied = min(self._applied_floor, kept)
        hard_state, damage = load_raft_state(stream_log, self._replica_count(self._bootstrap))
        self.node = RaftNode(self.node_id, self._bootstrap, self.storage, self.config, hard_state=hard_state,
                             rng=self._rng, applied=applied, damage=damage, membership=self._durable_membership,
                             conf_lost=self._conf_lost and not self._durable_membership,
                             lease_after_start=True, peer_alive=self._peer_alive)
