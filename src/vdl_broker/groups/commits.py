"""Where the coordinator meets the replicated group state: which commits a group accepts, and
the conversion of a group to and from its stored (replicated) form."""

from __future__ import annotations

from typing import Any

from vdl_broker.cluster.groups import StoredGroup, StoredMember
from vdl_broker.groups.consumer import ConsumerGroup, ConsumerMember
from vdl_broker.groups.coordinator import Group, GroupState, Member
from vdl_wire.errors import ErrorCode


def check_commit(group: Group | None, generation_id: int, member_id: str,
                 instance_id: str | None = None) -> ErrorCode:
    """Whether an OffsetCommit from (generation_id, member_id, instance_id) may store offsets, as
    Kafka's GroupCoordinator.handleCommitOffsets decides: a commit with no generation (-1) to a
    group without members is a standalone commit (the group only stores offsets); a member
    commits only in its current generation, and not while the generation's assignment is not out
    yet; a static member replaced by a restart of its instance is fenced (Group.check_member)."""
    if group is None or not group.members:
        if generation_id < 0:
            return ErrorCode.NONE
        # A generation that no coordinator knows any more (the group emptied or never existed).
        return ErrorCode.ILLEGAL_GENERATION if group is None else ErrorCode.UNKNOWN_MEMBER_ID
    if (code := group.check_member(member_id, instance_id)) is not ErrorCode.NONE:
        return code
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def check_txn_commit(group: Group | None, known: bool, generation_id: int, member_id: str,
                     instance_id: str | None) -> ErrorCode:
    """Whether a TxnOffsetCommit (v3+, KIP-447) from (generation_id, member_id, instance_id) may
    put offsets in its transaction, as Kafka's ClassicGroup.validateOffsetCommit decides for a
    transactional commit: a consumer that a rebalance fenced out of the group (a zombie of
    consume-transform-produce) is refused, so its output's offsets cannot commit. No generation
    and no member (a producer outside group management, or v0-2) always may; unlike OffsetCommit,
    a completing rebalance does not refuse it. `known`: the group has stored offsets or a
    generation (an empty group refuses a member as unknown, a group never seen its generation)."""
    if group is None or not group.members:
        if generation_id < 0:
            return ErrorCode.NONE
        return ErrorCode.UNKNOWN_MEMBER_ID if known else ErrorCode.ILLEGAL_GENERATION
    if generation_id < 0 and not member_id and instance_id is None:
        return ErrorCode.NONE
    if (code := group.check_member(member_id, instance_id)) is not ErrorCode.NONE:
        return code
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
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


def consumer_group_state(group: ConsumerGroup) -> dict[str, Any]:
    """A KIP-848 group as the metadata stores it (members [] once its last member left)."""
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor": group.assignor, "subscribed_streams": sorted(group.subscribed_streams),
            "target": {member_id: sorted(streams) for member_id, streams in group.target.items()},
            "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "rebalance_timeout_ms": m.rebalance_timeout_ms, "subscribed": list(m.subscribed),
                         "server_assignor": m.server_assignor, "epoch": m.epoch,
                         "previous_epoch": m.previous_epoch, "owned": sorted(m.owned),
                         "revoking": sorted(m.revoking), **({"regex": m.regex} if m.regex is not None else {})}
                        for m in group.members.values()]}


def restore_consumer_group(group_id: str, state: dict[str, Any]) -> ConsumerGroup:
    """The group consumer_group_state() stored (sessions are the adopting coordinator's)."""
    group = ConsumerGroup(group_id, int(state["group_epoch"]), int(state["assignment_epoch"]),
                          target={mid: frozenset(s) for mid, s in state["target"].items()},
                          subscribed_streams=frozenset(state["subscribed_streams"]), assignor=str(state["assignor"]))
    for m in state["members"]:
        group.members[m["member_id"]] = ConsumerMember(
            m["member_id"], m["instance_id"], m["rack_id"], m["client_id"], m["client_host"],
            int(m["rebalance_timeout_ms"]), tuple(m["subscribed"]), m["server_assignor"], int(m["epoch"]),
            int(m["previous_epoch"]), frozenset(m["owned"]), frozenset(m["revoking"]), regex=m.get("regex"))
    return group
