"""The state the rooms of RaftNode share.

RaftNode (vdl_broker.raft.node) is one object assembled from one class per concern, each in its
own module: elections (election.py), the leader's replication and progress (replication.py),
the follower (follower.py), damage recovery (recovery.py), configuration changes
(confchange.py) and quiescence (quiescence.py). They share the node's state, declared here once
and set in RaftNode.__init__; a room calls another's methods through the declarations below.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from vdl_broker.raft.types import CONF_UNKNOWN, Message, MessageType, Role

if TYPE_CHECKING:
    from vdl_broker.raft.config import RaftConfig
    from vdl_broker.raft.log import RaftLog
    from vdl_broker.raft.membership import Membership
    from vdl_broker.raft.progress import Progress
    from vdl_broker.raft.types import Damage, EntryType, HardState


class NodeState:
    id: int
    config: RaftConfig
    log: RaftLog
    membership: Membership
    _rng: random.Random

    # Persistent (HardState) and volatile Raft state.
    term: int
    voted_for: int
    role: Role
    leader_id: int
    ticks: int  # ticks since start: stamps heartbeats for the read lease
    election_elapsed: int
    heartbeat_elapsed: int
    randomized_timeout: int
    _booting: bool  # RaftNode's lease_after_start, until election_ticks have passed
    _term_step: int  # how far this node's next campaign moves its term (Quiescence.defer_campaign)

    # The configuration in force (confchange.py).
    voters: tuple[int, ...]
    learners: tuple[int, ...]
    peers: tuple[int, ...]  # every other member: voters and learners
    _voter_peers: tuple[int, ...]
    _voter_set: frozenset[int]
    quorum: int
    _conf_version: int
    _conf_lost: bool  # the saved records were unreadable and no configuration reached us since

    # Leader and candidate.
    progress: dict[int, Progress]  # the leader's view of every member, itself included
    votes: dict[int, bool]
    transferee: int

    # What the next Ready carries.
    _msgs: list[Message]
    _broadcast: bool  # new entries to replicate (batched until ready())
    _commit_changed: bool  # followers should learn the new commit index
    _prev_hard: HardState
    _durable_term: int  # the term of the last hard state known durable

    # Damage recovery (recovery.py).
    damage: Damage | None
    _recovering: bool
    _refetched: tuple[int, int, int]
    leader_commit: int  # the first commit index a leader reported since the start (node.py)
    _joining: bool  # a joiner that does not hold leader_commit yet: no campaign of its own (election.py)
    _asked_as_voter: bool  # a candidate counting us a voter was refused for our better log (election.py)

    # Quiescence (quiescence.py).
    quiescent: bool
    _idle_heartbeats: int
    _peer_alive: Callable[[int], bool] | None  # the driver's node liveness (None: none)

    def _send(self, kind: MessageType, to: int, **fields: object) -> None:
        if self._conf_lost and kind == MessageType.APPEND_RESPONSE and not fields.get("reject"):
            fields["log_term"] = CONF_UNKNOWN  # ask the leader for the configuration (confchange.py)
        self._msgs.append(Message(kind, to, self.id, self.term, **fields))  # type: ignore[arg-type]

    def _durable_index(self) -> int:
        return self.log.offset - 1  # everything below the unstable offset is in storage

    if TYPE_CHECKING:  # the rooms' methods other rooms call
        def _become_follower(self, term: int, leader: int) -> None: ...  # node.py

        def _become_leader(self) -> None: ...  # replication.py

        def _hup(self, force: bool) -> None: ...  # election.py

        def _step_follower(self, m: Message) -> None: ...  # follower.py

        def _send_append(self, peer: int, send_if_empty: bool = False) -> bool: ...  # replication.py

        def _broadcast_heartbeat(self) -> None: ...  # replication.py

        def _maybe_commit(self) -> bool: ...  # replication.py

        def _wake(self, by: int) -> None: ...  # quiescence.py

        def _maybe_quiesce(self) -> bool: ...  # quiescence.py

        def _note_refetched(self, index: int, commit: int) -> None: ...  # recovery.py

        def _note_log_reset(self, index: int) -> None: ...  # recovery.py

        def _reset(self, term: int) -> None: ...  # node.py

        def _append_own(self, type: EntryType, data: bytes | memoryview,
                        known_crc: tuple[int, int] | None = None) -> int: ...  # node.py

        def _sync_conf(self) -> None: ...  # confchange.py

        def reassert_conf(self, follower_match: int) -> None: ...  # confchange.py

        @property
        def conf_pending(self) -> bool: ...  # confchange.py

        @property
        def current_term_committed(self) -> bool: ...  # node.py
