"""The state the parts of RaftGroup share.

RaftGroup (vdl_broker.raft.group: construction, inputs, proposals, lifecycle) is assembled from
one class per concern: the Ready loop (ready_loop.py), write-failure recovery
(write_failure.py), the leader's read lease and in-sync replicas (lease.py), and snapshots of
its state machine (snapshotting.py). They share the
group's state, declared here once and set in RaftGroup.__init__.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from vdl_broker.raft.clock import DriftMonitor
from vdl_broker.raft.types import ConfState

if TYPE_CHECKING:
    from vdl_broker.log import StreamLog
    from vdl_broker.raft.config import RaftConfig
    from vdl_broker.raft.group import RaftGroup
    from vdl_broker.raft.log_storage import StreamLogStorage
    from vdl_broker.raft.node import RaftNode
    from vdl_broker.raft.proposals import ProposalTracker
    from vdl_broker.raft.snapshots import Snapshot, SnapshotStore
    from vdl_broker.raft.snapshotting import StateMachine
    from vdl_broker.raft.types import ConfigRecord, Entry, Message, SnapshotMeta

SendFn = Callable[[str, "Message"], bool]
ApplyFn = Callable[[list["Entry"]], None]
SnapshotFn = Callable[["SnapshotMeta"], None]
LatencyFn = Callable[[float], None]  # seconds, for metrics (vdl_broker.metrics)
GroupFn = Callable[["RaftGroup"], None]


class GroupState:
    name: str
    node_id: int
    log: StreamLog
    storage: StreamLogStorage
    node: RaftNode  # replaced by a new core after a failed write (write_failure.py)
    config: RaftConfig
    _rng: random.Random
    _clock: Callable[[], float]  # monotonic seconds (lease.py)
    _bootstrap: tuple[int, ...]  # the voters the group was created with (RaftNode's voters)
    _durable_membership: list[ConfigRecord]
    _conf_lost: bool  # the saved configuration records were unreadable at the start
    _proposals: ProposalTracker
    _send_fn: SendFn
    _send_catchup: SendFn
    _apply_fn: ApplyFn | None
    _snapshot_fn: SnapshotFn | None
    _commit_listeners: list[GroupFn]
    _role_listeners: list[GroupFn]
    _change_waiters: list[asyncio.Future[None]]
    _wake: asyncio.Event
    _stopped: bool
    failure: BaseException | None
    _on_failure: Callable[[BaseException], None] | None  # told when the group stops on its own
    _applied_floor: int  # entries up to here were applied (kept across core restarts)
    _applied_through: int  # the last entry applied here: the most followers may learn is committed
    write_failures: int
    write_failing: bool
    _commit_point: bool  # resume_from_commit_point
    elections_won: int
    _leading: bool
    _leader_since: float
    _tick_times: deque[float]  # when each recent tick happened (lease.py)
    _entry_bytes: int  # the log's average entry size (lease.py)
    _peer_alive: Callable[[int], bool] | None
    _drift: DriftMonitor  # the followers' clocks against ours (lease.py)
    # Snapshots (snapshotting.py; None: a group without a state machine).
    _machine: StateMachine | None
    _snapshots: SnapshotStore | None
    _latest: Snapshot | None
    _since_entries: int
    _since_bytes: int
    _snapshotting: asyncio.Task[None] | None
    _may_truncate: Callable[[], bool]

    @property
    def voters(self) -> tuple[int, ...]:
        """The voters of the configuration in force here (the latest in the log)."""
        return self.node.voters

    @property
    def applied_through(self) -> int:
        """The last entry applied here (a snapshot's start counts as applied)."""
        return max(self._applied_through, self.node.applied_index)

    def _replica_count(self, bootstrap: tuple[int, ...]) -> int:
        """How many replicas the group has as far as this node knows (a joining one: several)."""
        records = self._durable_membership
        conf = records[-1].conf if records else ConfState(bootstrap)
        return len(set(conf.members) | {self.node_id}) if conf.voters else 2

    def _notify_change(self) -> None:
        waiters, self._change_waiters = self._change_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    if TYPE_CHECKING:  # the parts' methods other parts call
        def _poke(self) -> None: ...  # group.py

        def _apply(self, entries: list[Entry]) -> None: ...  # ready_loop.py

        def _role_changed(self) -> None: ...  # ready_loop.py

        def _save_commit_point_soon(self) -> None: ...  # group.py
