"""Consumer-group coordinator: membership, generations and rebalances, as Kafka's classic
group protocol does it (GroupCoordinator.scala, KIP-394 for MEMBER_ID_REQUIRED).

Offsets and settled generations are replicated by the metadata group (groups/commits.py); this
module runs the membership protocol: JoinGroup collects the members of a generation and hands the leader every member's metadata;
SyncGroup passes the leader's assignment through to each member unchanged; Heartbeat keeps a
member's session alive and tells it when a rebalance starts; LeaveGroup removes it.

Decisions are pure functions of the group state; waiting (a JoinGroup parked until the
rebalance completes, a SyncGroup parked until the leader's assignment arrives) uses asyncio
futures, and the session and rebalance timeouts use the loop's timers. `on_settled` is told
each time a group reaches a generation worth keeping (Stable with its assignment, or Empty), so
the broker can replicate it; `adopt` takes such a group back on a new coordinator.
"""


from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from vdl_broker.groups.model import (
    CoordinatorConfig,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from vdl_wire.errors import ErrorCode

__all__ = ["CoordinatorConfig", "Group", "GroupCoordinator", "GroupState", "JoinResult", "Member", "SyncResult"]

log = logging.getLogger(__name__)


class GroupCoordinator:
    """All groups of this node. Must be used from within one running event loop."""

    def __init__(self, config: CoordinatorConfig | None = None,
                 new_member_id: Callable[[str], str] | None = None,
                 on_settled: Callable[[Group], None] | None = None,
                 initial_generation: Callable[[str], int] | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self._groups: dict[str, Group] = {}
        self._new_member_id = new_member_id or (lambda client_id: f"{client_id}-{uuid.uuid4()}")
        self._on_settled = on_settled or (lambda group: None)
        # A group re-created after being empty continues its stored generation numbers, so a
        # member of an old generation can never match a new one.
        self._initial_generation = initial_generation or (lambda group_id: 0)

    # -- queries ---------------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def adopt(self, group: Group) -> None:
        """Take over a group restored from the metadata (a new coordinator): its members keep
        their ids and generation, each with a fresh session timeout to show up in."""
        self._groups[group.group_id] = group
        for member in group.members.values():
            self._schedule_session(group, member)

    def forget(self, group_id: str) -> None:
        """Drop an empty group (DeleteGroups)."""
        group = self._groups.get(group_id)
        if group is not None and not group.members:
            if group.rebalance_timer:
                group.rebalance_timer.cancel()
            for handle in group.pending_members.values():
                handle.cancel()
            self._groups.pop(group_id, None)

    def close(self) -> None:
        """Cancel every timer and fail parked requests (broker shutdown)."""
        for group in self._groups.values():
            if group.rebalance_timer:
                group.rebalance_timer.cancel()
            for handle in group.pending_members.values():
                handle.cancel()
            for member in group.members.values():
                if member.session_timer:
                    member.session_timer.cancel()
                _resolve(member.join_future, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                _resolve(member.sync_future, SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        self._groups.clear()

    # -- JoinGroup --------------------------------------------------------------------------

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        log.debug("join %s member=%r", group_id, member_id)
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        if not (self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._groups[group_id] = Group(group_id, generation_id=self._initial_generation(group_id))
        if not protocols or not protocol_type:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if group.members and not _supports_protocols(group, protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)

        loop = asyncio.get_running_loop()
        if not member_id and group_instance_id is not None:
            # KIP-345: a static member (group.instance.id) joins without KIP-394's round trip; a
            # restarted instance takes over its old membership, assignment included.
            member_id = self._new_member_id(client_id or "member")
            old_id = group.static_member_id(group_instance_id)
            if old_id is not None:
                replaced = self._replace_static_member(group, old_id, member_id, client_id, client_host,
                                                       session_timeout_ms, rebalance_timeout_ms, protocols)
                if replaced is not None:
                    return replaced
        elif not member_id:
            member_id = self._new_member_id(client_id or "member")
            if require_known_member_id:
                # KIP-394: hand out the id first, so a client that dies before rejoining leaves
                # no half-member behind; it must rejoin with this id within its session timeout.
                group.pending_members[member_id] = loop.call_later(
                    session_timeout_ms / 1000, self._expire_pending, group, member_id)
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        elif member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
        elif (code := group.check_member(member_id, group_instance_id)) is not ErrorCode.NONE:
            return JoinResult(code, member_id=member_id)

        member = group.members.get(member_id)
        if member is not None and self._unchanged_rejoin(group, member, protocols):
            # Kafka: a member rejoining with the same protocols while the generation is being
            # synced (or, unless it leads, while stable) just gets the current generation back.
            self._schedule_session(group, member)
            return self._join_result(group, member)
        if member is None:
            member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, list(protocols))
            group.members[member_id] = member
            group.new_member_added = True
            if group.leader_id is None:
                group.leader_id = member_id
            group.protocol_type = protocol_type
        else:
            member.protocols = list(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            # A rejoin replaces any join still parked for this member (the client gave up on it).
            _resolve(member.join_future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            _resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = None
        future: asyncio.Future[JoinResult] = loop.create_future()
        member.join_future = future
        self._cancel_session(member)

        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group)
        self._try_complete_join(group)
        return await future

    def _replace_static_member(self, group: Group, old_id: str, member_id: str, client_id: str,
                               client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                               protocols: list[tuple[str, bytes]]) -> JoinResult | None:
        """A restarted static member (Kafka: updateStaticMemberAndRebalance) takes the place of
        `old_id` under the new `member_id`: the old instance's parked requests are fenced. In a
        Stable group whose protocol stays the same it gets the current generation at once, with
        the old member's assignment and no rebalance (the result); else None, the group is
        rebalancing and the join goes on as the member's rejoin."""
        old = group.members.pop(old_id)
        self._cancel_session(old)
        _resolve(old.join_future, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        _resolve(old.sync_future, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member = Member(member_id, old.group_instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, old.protocol_type, list(protocols), assignment=old.assignment)
        group.members[member_id] = member
        leader = group.leader_id
        if leader == old_id:
            group.leader_id = member_id
        log.info("group %s: static member %s rejoined as %s (was %s)", group.group_id, old.group_instance_id,
                 member_id, old_id)
        if group.state is not GroupState.STABLE or group.select_protocol() != group.protocol_name:
            if group.state is not GroupState.PREPARING_REBALANCE:
                # Completing: the leader may be assigning to the old member id; Stable: the
                # protocol changes. Either way the generation is redone with the new member.
                self._prepare_rebalance(group)
            return None
        self._schedule_session(group, member)
        self._on_settled(group)
        # The old leader's id, as Kafka answers: the member must not take itself for the leader
        # and assign, since a Stable group passes on no new assignment.
        return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_name, leader or "", member_id, [],
                          group.protocol_type)

    def _prepare_rebalance(self, group: Group) -> None:
        log.info("group %s: rebalance (generation %d, %d members)", group.group_id, group.generation_id,
                 len(group.members))
        loop = asyncio.get_running_loop()
        first = group.state is GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        # Members parked in SyncGroup learn the generation is over.
        for member in group.members.values():
            _resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_future = None
        if group.rebalance_timer:
            group.rebalance_timer.cancel()
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        if first and self.config.initial_rebalance_delay_ms > 0:
            # Kafka (GroupCoordinator, InitialDelayedJoin): wait min(delay, rebalance timeout),
            # again each time a member joined meanwhile, never beyond the rebalance timeout.
            delay_ms = min(timeout_ms, self.config.initial_rebalance_delay_ms)
            group.initial_join = True
            group.new_member_added = False
            group.initial_remaining_ms = timeout_ms - delay_ms
            group.rebalance_timer = loop.call_later(delay_ms / 1000, self._initial_delay_over, group)
            return
        group.initial_join = False
        group.rebalance_timer = loop.call_later(timeout_ms / 1000, self._rebalance_timeout, group)

    def _initial_delay_over(self, group: Group) -> None:
        group.rebalance_timer = None
        if group.state is not GroupState.PREPARING_REBALANCE or not group.initial_join:
            return
        if group.new_member_added and group.initial_remaining_ms > 0:
            delay_ms = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms -= delay_ms
            group.new_member_added = False
            group.rebalance_timer = asyncio.get_running_loop().call_later(
                delay_ms / 1000, self._initial_delay_over, group)
            return
        group.initial_join = False
        self._rebalance_timeout(group)

    def _rebalance_timeout(self, group: Group) -> None:
        group.rebalance_timer = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        # Members that did not rejoin in time are out of the new generation. Ids handed out with
        # MEMBER_ID_REQUIRED stay valid until their own session timeout: a client rejoining
        # with one later is a new member (and starts the next rebalance), not a stranger.
        for member in [m for m in group.members.values() if m.join_future is None]:
            self._remove_member(group, member)
        self._complete_join(group)
        self._drop_if_empty(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if not group.members and not group.pending_members:
            self._complete_join(group)
        elif group.initial_join:
            return  # the first generation waits out the initial delay for more members
        elif group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_timer:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        group.initial_join = False
        group.generation_id += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = None
            self._on_settled(group)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.state = GroupState.COMPLETING_REBALANCE
        log.info("group %s generation %d: %d members, leader %s, protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.leader_id, group.protocol_name)
        for member in group.members.values():
            _resolve(member.join_future, self._join_result(group, member))
            member.join_future = None
            member.assignment = b""
            self._schedule_session(group, member)

    @staticmethod
    def _unchanged_rejoin(group: Group, member: Member, protocols: list[tuple[str, bytes]]) -> bool:
        if member.join_future is not None or member.protocols != list(protocols):
            return False
        if group.state is GroupState.COMPLETING_REBALANCE:
            return True
        return group.state is GroupState.STABLE and member.member_id != group.leader_id

    @staticmethod
    def _join_result(group: Group, member: Member) -> JoinResult:
        """The current generation as this member sees it (only the leader gets the members)."""
        members = []
        if member.member_id == group.leader_id:
            members = [(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name or ""))
                       for m in group.members.values()]
        return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_name, group.leader_id or "",
                          member.member_id, members, group.protocol_type)

    # -- SyncGroup --------------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: list[tuple[str, bytes]], protocol_type: str | None = None,
                         protocol_name: str | None = None, group_instance_id: str | None = None) -> SyncResult:
        """`protocol_type` and `protocol_name` (SyncGroup v5+, KIP-559), when given, must be the
        group's."""
        group = self._groups.get(group_id)
        log.debug("sync %s gen=%d member=%r state=%s", group_id, generation_id, member_id,
                  group.state.value if group else None)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if (code := group.check_member(member_id, group_instance_id)) is not ErrorCode.NONE:
            return SyncResult(code)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is GroupState.STABLE:
            self._schedule_session(group, member)
            return self._sync_result(group, member)
        # CompletingRebalance: park until the leader sends the assignment.
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        _resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = future
        self._schedule_session(group, member)
        if member_id == group.leader_id:
            by_member = dict(assignments)
            group.state = GroupState.STABLE
            for each in group.members.values():
                each.assignment = by_member.get(each.member_id, b"")
                if each.sync_future is not None:
                    _resolve(each.sync_future, self._sync_result(group, each))
                    each.sync_future = None
            self._on_settled(group)
        return await future

    @staticmethod
    def _sync_result(group: Group, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)

    # -- Heartbeat / LeaveGroup -------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        group = self._groups.get(group_id)
        log.debug("heartbeat %s gen=%d member=%r state=%s", group_id, generation_id, member_id,
                  group.state.value if group else None)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if (code := group.check_member(member_id, group_instance_id)) is not ErrorCode.NONE:
            return code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            # Keep the session alive while the member is told to rejoin.
            if member.join_future is None:
                self._schedule_session(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._schedule_session(group, member)
        return ErrorCode.NONE

    def leave_group(self, group_id: str, member_id: str, group_instance_id: str | None = None) -> ErrorCode:
        """LeaveGroup v3+ may name a static member by its instance id alone (the admin clients'
        removeMembersFromConsumerGroup); with a member id too, it must be the instance's."""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group_instance_id is not None:
            if not member_id:
                member_id = group.static_member_id(group_instance_id) or ""
            if (code := group.check_member(member_id, group_instance_id)) is not ErrorCode.NONE:
                return code
        if member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            self._try_complete_join(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        _resolve(member.join_future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        self._remove_member(group, member)
        self._member_gone(group)
        return ErrorCode.NONE

    # -- sessions ---------------------------------------------------------------------------

    def _schedule_session(self, group: Group, member: Member) -> None:
        self._cancel_session(member)
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member.member_id)

    @staticmethod
    def _cancel_session(member: Member) -> None:
        if member.session_timer:
            member.session_timer.cancel()
            member.session_timer = None

    def _session_expired(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or member.join_future is not None:
            return  # a member parked in JoinGroup is alive by definition
        self._remove_member(group, member)
        self._member_gone(group)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            self._try_complete_join(group)
            self._drop_if_empty(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        log.info("group %s: member %s removed (state %s)", group.group_id, member.member_id, group.state.value)
        self._cancel_session(member)
        _resolve(member.sync_future, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.members.pop(member.member_id, None)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _member_gone(self, group: Group) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group)
            else:
                group.state = GroupState.EMPTY
                group.generation_id += 1
                self._on_settled(group)
        self._try_complete_join(group)
        self._drop_if_empty(group)

    def _drop_if_empty(self, group: Group) -> None:
        if group.state is GroupState.EMPTY and not group.members and not group.pending_members:
            if group.rebalance_timer:
                group.rebalance_timer.cancel()
            # Generation numbers stay monotonic only while the group exists; an empty group
            # has nothing to protect, as in Kafka once it is Dead.
            self._groups.pop(group.group_id, None)


def _supports_protocols(group: Group, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """Whether a join with these protocols fits a non-empty group: same protocol type, and at
    least one of them supported by every current member -- the joining member's current
    protocols count too (Kafka: GroupMetadata.supportsProtocols), so a lone member that switches
    to protocols it did not offer before is refused as well."""
    if group.protocol_type != protocol_type:
        return False
    members = [{name for name, _ in m.protocols} for m in group.members.values()]
    return any(all(name in offered for offered in members) for name, _ in protocols)


def _resolve(future: asyncio.Future | None, value: object) -> None:
    if future is not None and not future.done():
        future.set_result(value)
