"""The group coordinator of one node, tied to the metadata group: this node coordinates every
group while it leads the metadata group (FindCoordinator names that node), and the groups'
offsets and settled generations are metadata commands, so a new leader carries on where the
old one stopped.

Each leadership term starts from the replicated state: every group that was Stable gets its
members back with a fresh session timeout (they keep heartbeating with the same member id and
generation; one that does not show up in time is removed and the group rebalances once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from vdl_broker.cluster.features import EMPTY_CONSUMER_GROUPS_LEVEL
from vdl_broker.cluster.group_configs import GroupConfigBounds
from vdl_broker.cluster.groups import (
    CommittedOffset,
    commit_offsets_command,
    consumer_group_command,
    consumer_group_empty_command,
    delete_group_command,
    delete_offsets_command,
    expire_offsets_command,
    group_generation_command,
)
from vdl_broker.cluster.service import MetadataService
from vdl_broker.groups.commits import (
    check_commit,
    check_txn_commit,
    consumer_group_state,
    restore_consumer_group,
    restore_group,
    stored_members,
)
from vdl_broker.groups.consumer import ConsumerGroup, ConsumerGroupConfig, ConsumerGroupCoordinator
from vdl_broker.groups.coordinator import CoordinatorConfig, Group, GroupCoordinator
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_wire.errors import ErrorCode

log = logging.getLogger(__name__)

EXPIRY_CHECK_S = 0.25


@dataclass(frozen=True)
class OffsetToCommit:
    stream: str
    offset: int
    leader_epoch: int
    metadata: str | None


class GroupService:
    def __init__(self, metadata: MetadataService, config: CoordinatorConfig, retention_ms: int,
                 retention_check_ms: int, metadata_max_bytes: int, consumer_defaults: GroupConfigBounds,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.metadata = metadata
        self.retention_ms = retention_ms
        self.retention_check_ms = retention_check_ms
        self.metadata_max_bytes = metadata_max_bytes
        self._clock_ms = clock_ms
        self.coordinator = GroupCoordinator(config, on_settled=self._settled,
                                            initial_generation=self._stored_generation)
        # KIP-848 groups (group.protocol=consumer): one group id is either kind, never both.
        self._consumer_defaults = consumer_defaults
        self.consumer_groups = ConsumerGroupCoordinator(self._consumer_config, on_changed=self._consumer_group_changed,
                                                        initial_epoch=self._stored_group_epoch)
        self._term = -1
        self._retention_task: asyncio.Task[None] | None = None
        self._expiry_task: asyncio.Task[None] | None = None

    # -- lifecycle

    def start(self, group: RaftGroup) -> None:
        group.add_role_listener(self._role_changed)
        self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop())
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    def close(self) -> None:
        for task in (self._retention_task, self._expiry_task):
            if task is not None:
                task.cancel()
        self.coordinator.close()
        self.consumer_groups.clear()

    def _role_changed(self, group: RaftGroup) -> None:
        if self._term >= 0 and not (group.is_leader and group.term == self._term):
            log.info("no longer coordinating groups (term %d)", self._term)
            self._term = -1
            self.coordinator.close()
            self.consumer_groups.clear()

    def active(self) -> GroupCoordinator | None:
        """The coordinator while this node leads the metadata group (its state complete), else
        None: the caller answers NOT_COORDINATOR and the client looks the coordinator up again."""
        group = self.metadata.group
        if group is None or not self.metadata.is_leader:
            return None
        if self._term != group.term:
            self.coordinator.close()
            for stored in self.metadata.state.groups.groups.values():
                restored = restore_group(stored)
                if restored is not None:
                    self.coordinator.adopt(restored)
            self.consumer_groups.clear()
            stored_groups = self.metadata.state.groups
            for group_id, state in stored_groups.consumer_groups.items():
                if stored_groups.empty_consumer_group(group_id) is None:  # an empty one is only stored
                    self.consumer_groups.adopt(restore_consumer_group(group_id, state), self._clock_ms())
            self._term = group.term
            log.info("coordinating groups from term %d (%d groups with members)", self._term,
                     len(self.coordinator.groups()))
        return self.coordinator

    # -- replicated state

    def committed(self, group_id: str) -> dict[str, CommittedOffset]:
        return self.metadata.state.groups.committed(group_id)

    def known(self, group_id: str) -> bool:
        return group_id in self.metadata.state.groups.group_ids() or self.coordinator.group(group_id) is not None \
            or self.consumer_groups.group(group_id) is not None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """A KIP-848 group: the coordinator's, or one whose members all left (stored, Empty)."""
        live = self.consumer_groups.group(group_id)
        if live is not None:
            return live
        empty = self.metadata.state.groups.empty_consumer_group(group_id)
        return restore_consumer_group(group_id, empty) if empty is not None else None

    def clock_ms(self) -> int:
        return self._clock_ms()

    def streams(self) -> set[str]:
        return set(self.metadata.state.streams)

    def _consumer_group_changed(self, group: ConsumerGroup) -> None:
        if group.members:
            command = consumer_group_command(group.group_id, consumer_group_state(group))
        elif self.metadata.state.features.level >= EMPTY_CONSUMER_GROUPS_LEVEL:
            # Its last member left: it stays a KIP-848 group while it has offsets, as in Kafka.
            command = consumer_group_empty_command(group.group_id, consumer_group_state(group))
        else:
            command = consumer_group_command(group.group_id, None)  # forgotten (nodes on the older release)
        if not self.metadata.propose(command):
            log.warning("consumer group %s: epoch %d not recorded (no longer the metadata leader)",
                        group.group_id, group.group_epoch)

    async def _expiry_loop(self) -> None:
        """KIP-848 sessions and revocations run out here; the coordinator itself keeps no timers."""
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            try:
                if self.active() is not None:
                    for group_id, member_id in self.consumer_groups.expire(self._clock_ms(), self.streams()):
                        log.info("consumer group %s: member %s removed (session or rebalance timeout)",
                                 group_id, member_id)
            except Exception:
                log.exception("consumer group expiry pass failed")

    def _consumer_config(self, group_id: str) -> ConsumerGroupConfig:
        """A KIP-848 group's session timeout and heartbeat interval: its own configs, replicated
        (cluster/group_configs.py), else the node's settings."""
        return ConsumerGroupConfig(*self._consumer_defaults.effective(self.metadata.state.groups.configs.get(group_id,
                                                                                                             {})))

    def _stored_group_epoch(self, group_id: str) -> int:
        """Where a KIP-848 group whose members all left resumes its group epoch (Kafka keeps it)."""
        empty = self.metadata.state.groups.empty_consumer_group(group_id)
        return int(empty["group_epoch"]) if empty is not None else 0

    def _stored_generation(self, group_id: str) -> int:
        stored = self.metadata.state.groups.groups.get(group_id)
        return stored.generation_id if stored is not None else 0

    def _settled(self, group: Group) -> None:
        command = group_generation_command(group.group_id, self._clock_ms(), group.generation_id,
                                           group.protocol_type, group.protocol_name, group.leader_id,
                                           stored_members(group))
        if not self.metadata.propose(command):
            log.warning("group %s: generation %d not recorded (no longer the metadata leader)",
                        group.group_id, group.generation_id)

    async def _submit(self, command: dict) -> ErrorCode:
        try:
            result = await self.metadata.submit(command)
        except NotLeaderError:
            return ErrorCode.NOT_COORDINATOR
        except RaftError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE if result.ok else ErrorCode.UNKNOWN_SERVER_ERROR

    # -- requests (the caller has checked active())

    async def commit(self, group_id: str, generation_id: int, member_id: str,
                     offsets: list[OffsetToCommit], version_with_epoch: bool = False,
                     instance_id: str | None = None) -> dict[str, ErrorCode]:
        """Per stream, the answer to an OffsetCommit of `offsets`; `generation_id` is the member
        epoch for a KIP-848 group (`version_with_epoch`: OffsetCommit v9+); `instance_id` a
        classic static member's (v7+)."""
        if self.consumer_groups.group(group_id) is not None:
            code = self.consumer_groups.check_commit(group_id, member_id, generation_id, version_with_epoch)
        else:
            code = check_commit(self.coordinator.group(group_id), generation_id, member_id, instance_id)
        if code is not ErrorCode.NONE:
            return {o.stream: code for o in offsets}
        results: dict[str, ErrorCode] = {}
        accepted: dict[str, tuple[int, int, str | None]] = {}
        streams = self.metadata.state.streams
        for o in offsets:
            if o.stream not in streams:
                results[o.stream] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif o.metadata is not None and len(o.metadata.encode()) > self.metadata_max_bytes:
                results[o.stream] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[o.stream] = (o.offset, o.leader_epoch, o.metadata)
        if accepted and not self._unchanged(group_id, accepted):
            code = await self._submit(commit_offsets_command(group_id, self._clock_ms(), accepted))
            results.update(dict.fromkeys(accepted, code))
        else:
            results.update(dict.fromkeys(accepted, ErrorCode.NONE))
        return results

    def check_txn_commit(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None) -> ErrorCode:
        """Whether a TxnOffsetCommit naming this member of the group may add its offsets to its
        transaction (KIP-447; commits.check_txn_commit)."""
        if self.consumer_groups.group(group_id) is not None:
            return self.consumer_groups.check_txn_commit(group_id, member_id, generation_id, instance_id)
        return check_txn_commit(self.coordinator.group(group_id), self.known(group_id), generation_id, member_id,
                                instance_id)

    def _unchanged(self, group_id: str, offsets: dict[str, tuple[int, int, str | None]]) -> bool:
        """Auto-commit repeats the same offsets every few seconds; the metadata log is replayed
        from its start, so a repeat is stored only when its time matters again for retention."""
        stored = self.committed(group_id)
        fresh_after = self._clock_ms() - self.retention_ms // 2
        return all(stream in stored and (stored[stream].offset, stored[stream].leader_epoch,
                                         stored[stream].metadata) == value
                   and stored[stream].commit_ms > fresh_after for stream, value in offsets.items())

    async def delete_group(self, group_id: str) -> ErrorCode:
        group = self.coordinator.group(group_id)
        if (group is not None and group.members) or self.consumer_groups.group(group_id) is not None:
            return ErrorCode.NON_EMPTY_GROUP
        if not self.known(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        code = await self._submit(delete_group_command(group_id))
        if code is ErrorCode.NONE:
            self.coordinator.forget(group_id)
        return code

    async def delete_offsets(self, group_id: str, streams: list[str]) -> ErrorCode:
        return await self._submit(delete_offsets_command(group_id, streams))

    # -- retention

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset retention pass failed")

    def expire_offsets(self) -> list[str]:
        """Propose the expiry of every group whose offsets are due (leader only)."""
        if self.active() is None:
            return []
        live = {g.group_id for g in self.coordinator.groups() if g.members} | {
            g.group_id for g in self.consumer_groups.groups()}
        now = self._clock_ms()
        due = self.metadata.state.groups.expired_groups(now, self.retention_ms, live)
        if due:
            log.info("expiring the offsets of %d group(s) without members: %s", len(due), due)
            self.metadata.propose(expire_offsets_command(now, self.retention_ms, sorted(live)))
        return due
