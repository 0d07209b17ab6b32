"""The coordinator's data: groups, members, states and the results of joins and syncs."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from vdl_wire.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    # (member_id, group_instance_id, metadata) — only the leader receives the member list.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    protocol_type: str | None = None


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    assignment: bytes = b""
    session_timer: asyncio.TimerHandle | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # member ids handed out with MEMBER_ID_REQUIRED, waiting for the client to rejoin with them
    pending_members: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    rebalance_timer: asyncio.TimerHandle | None = None
    # The first rebalance of an empty group waits out the initial delay (Kafka's
    # InitialDelayedJoin) instead of completing as soon as every known member has joined.
    initial_join: bool = False
    # A member joined during the current initial delay, so the delay runs once more.
    new_member_added: bool = False
    # Rebalance time left for further initial delays, in ms.
    initial_remaining_ms: int = 0

    def static_member_id(self, instance_id: str) -> str | None:
        """The member id of the static member (KIP-345) with this group.instance.id, if any."""
        return next((m.member_id for m in self.members.values() if m.group_instance_id == instance_id), None)

    def check_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Whether a request naming (member_id, instance_id) comes from a current member, as
        Kafka's ClassicGroup.validateMember decides: a static member's instance id names one
        member id, and a request with an older one is from an instance that a restart with the
        same group.instance.id replaced (FENCED_INSTANCE_ID, fatal to the client, so two
        processes with one instance id do not take the membership from each other in turn)."""
        if instance_id is not None:
            static = self.static_member_id(instance_id)
            if static is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.NONE if static == member_id else ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def all_joined(self) -> bool:
        return bool(self.members) and all(m.join_future is not None for m in self.members.values()) \
            and not self.pending_members

    def select_protocol(self) -> str | None:
        """The protocol every member supports, preferring the members' own orderings
        (Kafka: each member votes for its first supported candidate, most votes win)."""
        members = list(self.members.values())
        candidates = set.intersection(*({name for name, _ in m.protocols} for m in members))
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for member in members:
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Ties go to the leader's (first member's) preference order.
        order = [name for name, _ in members[0].protocols if name in candidates]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))


@dataclass
class CoordinatorConfig:
    min_session_timeout_ms: int = 1_000
    max_session_timeout_ms: int = 1_800_000
    # Kafka's group.initial.rebalance.delay.ms (default 3000): a new group waits this long for
    # more members before its first generation, so members started together land in one
    # generation instead of the first one taking everything and a rebalance following at once.
    initial_rebalance_delay_ms: int = 3_000
