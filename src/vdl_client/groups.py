"""Consumer groups through a VdlClient, as Kafka's AdminClient and kafka-consumer-groups do it:
ListGroups, DescribeGroups, OffsetFetch and standalone OffsetCommit, each sent to the group's
coordinator (FindCoordinator) and retried through coordinator changes until the deadline.

A standalone commit (no generation, no member id) stores offsets for a group without members,
as Kafka's tools and Spark's progress commits (commitOffsetsToGroup) do; a group with members
refuses it (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION), which is what protects a live group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vdl_client.client import VdlClient
from vdl_client.routes import CoordinatorOf
from vdl_client.settings import VdlClientError
from vdl_wire.consumer_protocol import assigned_topics
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

EMPTY_STATES = frozenset({"Empty", "Dead"})


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    state: str
    protocol_type: str  # the members' protocol ("consumer"; "" for offsets committed without members)
    group_type: str  # Kafka's GroupType, as its tools print it: Classic, Consumer (KIP-848)


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    client_host: str
    streams: tuple[str, ...]  # what its assignment gives it (consumer protocol), sorted


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]

    @property
    def has_members(self) -> bool:
        return bool(self.members) or self.state not in EMPTY_STATES

    def owner_of(self, stream: str) -> GroupMember | None:
        return next((member for member in self.members if stream in member.streams), None)


# A standalone commit has no member epoch, so it needs nothing of OffsetCommit v9 (KIP-848), and
# v8 is served by every release: a cluster in the middle of a rolling upgrade takes it anywhere.
STANDALONE_COMMIT_VERSION = 8


def _to_coordinator(client: VdlClient, group_id: str, request: Any, error_of: Callable[[Any], int], what: str,
                    deadline: float | None = None, version: int | None = None) -> Any:
    """`request` at the group's coordinator; a retriable error (error_of(response): coordinator
    moved or starting, a timeout) and dead connections look the coordinator up again, until the
    deadline. Every request here is safe to repeat (reads, and commits of the same offsets)."""
    return client.call(CoordinatorOf(group_id), request, what, error_of=error_of, deadline=deadline, version=version)


def list_groups(client: VdlClient) -> list[ListedGroup]:
    """Every group the coordinator knows (with members, or only committed offsets), by id."""
    response = _to_coordinator(client, "", ListGroupsRequest(states_filter=[]), lambda r: r.error_code, "ListGroups")
    client.check_error(response.error_code, "ListGroups")
    # ListGroups v5 names the type ("classic", "consumer"); before, every group was classic.
    return sorted((ListedGroup(g.group_id, g.group_state, g.protocol_type, (g.group_type or "classic").capitalize())
                   for g in response.groups), key=lambda g: g.group_id)


def describe_group(client: VdlClient, group_id: str) -> GroupDescription:
    response = _to_coordinator(client, group_id, DescribeGroupsRequest(groups=[group_id]),
                               lambda r: r.groups[0].error_code, f"DescribeGroups {group_id!r}")
    group = response.groups[0]
    if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # DescribeGroups v6+: no such group
        return GroupDescription(group_id, "Dead", "", "", ())
    client.check_error(group.error_code, f"DescribeGroups {group_id!r}")
    members = []
    for member in group.members:
        assignment = assigned_topics(group.protocol_type, bytes(member.member_assignment or b"")) or {}
        members.append(GroupMember(member.member_id, member.client_id, member.client_host,
                                   tuple(sorted(topic for topic, parts in assignment.items() if 0 in parts))))
    return GroupDescription(group.group_id, group.group_state, group.protocol_type, group.protocol_data,
                            tuple(sorted(members, key=lambda m: m.member_id)))


def committed_offsets(client: VdlClient, group_id: str) -> dict[str, int]:
    """stream -> the group's committed offset (the next offset to read), for every stream with one."""
    request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=None)])
    response = _to_coordinator(client, group_id, request, lambda r: r.groups[0].error_code,
                               f"OffsetFetch {group_id!r}")
    group = response.groups[0]
    client.check_error(group.error_code, f"OffsetFetch {group_id!r}")
    return {topic.name: p.committed_offset for topic in group.topics for p in topic.partitions
            if p.partition_index == 0 and p.error_code == 0 and p.committed_offset >= 0}


def commit_offsets(client: VdlClient, group_id: str, offsets: Mapping[str, int], metadata: str | None = None,
                   timeout_s: float | None = None) -> None:
    """A standalone commit of `offsets` (stream -> next offset to read) for a group without
    members. Raises VdlClientError naming each stream the broker refused and why."""
    request = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=stream, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                             committed_leader_epoch=-1, committed_metadata=metadata)])
        for stream, offset in sorted(offsets.items())])

    def first_error(response: Any) -> int:
        return next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    response = _to_coordinator(client, group_id, request, first_error, f"OffsetCommit {group_id!r}", deadline,
                               STANDALONE_COMMIT_VERSION)
    refused = {t.name: ErrorCode(p.error_code).name for t in response.topics for p in t.partitions if p.error_code}
    if refused:
        details = ", ".join(f"{stream}: {error}" for stream, error in sorted(refused.items()))
        raise VdlClientError(f"OffsetCommit {group_id!r} refused ({details})")
