"""Where the coordinator meets the replicated group state: which commits a group accepts, and
the conversion of a group to and from its stored (replicated) form."""

from __future__ import annotations

from vdl_broker.cluster.groups import StoredGroup, StoredMember
from vdl_broker.groups.coordinator import Group, GroupState, Member
from vdl_wire.errors import ErrorCode


def check_commit(group: Group | None, generation_id: int, member_id: str) -> ErrorCode:
    """Whether an OffsetCommit from (generation_id, member_id) may store offsets, as Kafka's
    GroupCoordinator.handleCommitOffsets decides: a commit with no generation (-1) to a group
    without members is a standalone commit (the group only stores offsets); a member commits
    only in its current generation, and not while the generation's assignment is not out yet."""
    if group is None or not group.members:
        if generation_id < 0:
            return ErrorCode.NONE
        # A generation that no coordinator knows any more (the group emptied or never existed).
        return ErrorCode.ILLEGAL_GENERATION if group is None else ErrorCode.UNKNOWN_MEMBER_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def stored_members(group: Group) -> list[StoredMember]:
    return [StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                         m.rebalance_timeout_ms, tuple(m.protocols), m.assignment)
            for m in group.members.values()]


def restore_group(stored: StoredGroup) -> Group | None:
    """The in-memory group a new coordinator resumes (Stable, same generation and members);
    None for a group stored empty (it is re-created, at its next generation, by a join)."""
    if not stored.members:
        return None
    group = Group(stored.group_id, GroupState.STABLE, stored.generation_id, stored.protocol_type,
                  stored.protocol_name, stored.leader_id)
    for m in stored.members:
        group.members[m.member_id] = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                            m.session_timeout_ms, m.rebalance_timeout_ms,
                                            stored.protocol_type or "", list(m.protocols), assignment=m.assignment)
    return group
