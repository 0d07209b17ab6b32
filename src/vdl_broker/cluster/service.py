"""The metadata group on one node: ClusterState driven by the "__metadata" RaftGroup.

Every node runs it over all nodes (voters = the configured members). Committed entries are
applied to `state` on every node; the state is snapshotted every metadata_snapshot_entries /
metadata_snapshot_bytes and the log truncated behind it (raft/snapshotting.py), so a start
restores the latest snapshot and replays what follows. The leader,
once its no-op commits (so its state is complete), registers every configured member not yet
known; when the cluster is being formed (no cluster id yet) it also adopts the streams a VDL 0.1
single node left in its data directory and then records the new cluster id, once for good.

Commands go through the leader: `submit()` raises NotLeaderError(leader_id) elsewhere, and the
caller forwards the request to that node (e.g. CreateTopics to its client address, which
`state.nodes[leader_id].client` gives).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from vdl_broker.cluster.features import NewerMetadata
from vdl_broker.cluster.metadata import (
    METADATA_GROUP,
    ApplyResult,
    ClusterState,
    NodeInfo,
    Outcome,
    adopt_stream_command,
    create_stream_command,
    decode_command,
    decode_legacy_commands,
    delete_stream_command,
    encode_command,
    init_cluster_command,
    new_cluster_id,
    register_node_command,
)
from vdl_broker.cluster.stream_configs import alter_stream_config_command
from vdl_broker.cluster.users import bootstrap_user_command
from vdl_broker.config import NodeAddress, NodeConfig
from vdl_broker.log import DamagedEntry, StreamLog
from vdl_broker.raft.group import RaftGroup, campaign_first
from vdl_broker.raft.host import RaftHost
from vdl_broker.raft.proposals import Proposal
from vdl_broker.raft.types import Entry, EntryType, NotLeaderError, RaftError
from vdl_wire.sasl import ScramCredential

log = logging.getLogger(__name__)


def own_registration_differs(known: NodeInfo, own: NodeAddress) -> bool:
    """Whether a node's registered description differs from the one its own config gives."""
    return (known.client, known.raft, known.listeners, known.rack) != (own.client, own.raft, own.listeners, own.rack)

ChangeListener = Callable[[list[ApplyResult]], None]
LegacyStreams = Callable[[], list[str]]


class MetadataService:
    def __init__(self, host: RaftHost, config: NodeConfig, on_change: ChangeListener | None = None,
                 legacy_streams: LegacyStreams | None = None) -> None:
        self.host = host
        self.config = config
        self.log: StreamLog | None = None
        self.state = ClusterState()
        self._listeners: list[ChangeListener] = [on_change] if on_change is not None else []
        self._legacy_streams = legacy_streams
        self._registered_term = -1
        self.group: RaftGroup | None = None
        self.last_leader = 0  # the metadata leader this node last knew (kept while it knows none)

    def start(self, stream_log: StreamLog) -> RaftGroup:
        """Drive the metadata group over `stream_log` (<data_dir>/__metadata), replaying it."""
        self.log = stream_log
        # Never quiescent: it is one group, and the whole cluster's state and leadership hang on it.
        config = dataclasses.replace(self.host.raft_config, quiesce_after_heartbeats=0, prompt_commit_notices=True,
                                     snapshot_entries=self.config.metadata_snapshot_entries,
                                     snapshot_bytes=self.config.metadata_snapshot_bytes)
        self.group = self.host.create_group(METADATA_GROUP, self.config.voter_ids, stream_log, apply=self._apply,
                                            config=config, state_machine=self, may_truncate=self.may_truncate,
                                            on_failure=self._failed)
        self.group.add_commit_listener(self._after_commit)
        self.group.add_role_listener(self._note_leader)
        voters = self.config.voter_ids
        if stream_log.last_index == 0 and not self.config.join and len(voters) > 1 and self.config.node_id == min(voters):
            campaign_first(self.group)  # a forming cluster: its lowest node id leads first
        return self.group

    def _failed(self, error: BaseException) -> None:
        """The metadata group stopped on its own (RaftGroup.failure): an entry of its log failed
        its CRC while the node runs (storage_damaged), or its Ready loop met an error it could not
        recover from. The node's whole view of the cluster hangs on this group, and every
        component holds it: rather than serve a view that no longer moves, stop as kill -9 would
        (Kafka too shuts a broker down when its metadata log directory fails). The next start
        checks the log -- cutting it at damage, which it records and gets back from a peer -- and
        replays it."""
        if isinstance(error, DamagedEntry):
            _halt(f"the metadata log is damaged ({error}); start the node again: its start checks the log "
                  "and gets the damaged range back from a peer")
        _halt(f"the metadata group failed ({error}); start the node again: it replays its log and catches up")

    def _note_leader(self, group: RaftGroup) -> None:
        if group.leader_id:
            self.last_leader = group.leader_id

    def add_listener(self, listener: ChangeListener) -> None:
        """Called on every node with the results of each applied entry (streams created or
        deleted: create/remove the local replica's group)."""
        self._listeners.append(listener)

    @property
    def leader_id(self) -> int:
        return self.group.leader_id if self.group is not None else 0

    @property
    def is_leader(self) -> bool:
        return self.group is not None and self.group.leader_ready

    # ------------------------------------------------------------------ commands

    async def submit(self, command: dict[str, Any]) -> ApplyResult:
        """Propose `command` and wait until it is committed and applied here; its result.
        Raises NotLeaderError (with the leader id) on a non-leader or when leadership is lost."""
        return await self.result_of(self.propose_entry(command))

    def propose_entry(self, command: dict[str, Any]) -> Proposal:
        """Propose `command` now (entries proposed by one leader apply in the order proposed);
        `result_of` waits for its result. Raises NotLeaderError on a non-leader."""
        group = self.group
        if group is None or not group.leader_ready:
            raise NotLeaderError(self.leader_id, "not the metadata leader")
        return group.propose(encode_command(command), EntryType.METADATA)

    async def result_of(self, proposal: Proposal) -> ApplyResult:
        """The result of a proposed command once it is committed and applied here (raises
        NotLeaderError when leadership is lost first)."""
        await proposal.committed
        results = self.state.result_for(proposal.index)
        if not results:
            raise RaftError(f"no result for metadata entry {proposal.index}")
        return results[0]

    def propose(self, command: dict[str, Any]) -> bool:
        """Propose `command` without waiting for it (a coordinator recording a generation: the
        proposals of one leader commit in the order they were made). False when not leader."""
        group = self.group
        if group is None or not group.leader_ready:
            return False
        try:
            group.propose(encode_command(command), EntryType.METADATA)
        except RaftError:
            return False
        return True

    async def create_stream(self, name: str, replication_factor: int | None = None,
                            config: dict[str, Any] | None = None) -> ApplyResult:
        refused = self.state.check_create(name, replication_factor, config)
        if refused is not None and refused.outcome is not Outcome.EXISTS:
            return refused  # certain to fail: no need to write it to the log
        return await self.submit(create_stream_command(name, replication_factor, config))

    async def delete_stream(self, name: str) -> ApplyResult:
        return await self.submit(delete_stream_command(name))

    async def alter_stream_config(self, name: str, to_set: dict[str, str], to_delete: list[str]) -> ApplyResult:
        """Change a stream's config (validated by the caller: stream_configs.altered)."""
        return await self.submit(alter_stream_config_command(name, to_set, to_delete))

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def restore(self, data: bytes, index: int) -> None:
        """The state from a snapshot taken after entry `index` (at start, or sent by the leader)."""
        try:
            self.state.load_snapshot(data)
        except NewerMetadata as error:
            _halt(str(error))
        log.info("metadata: state restored from the snapshot at index %d", index)
        for listener in self._listeners:
            try:
                listener([])
            except Exception:
                log.exception("metadata listener failed after a snapshot")

    def may_truncate(self) -> bool:
        """Whether the metadata log may be truncated behind a snapshot: a release that replays it
        from its start must never open it again."""
        return True

    # ------------------------------------------------------------------ applying

    def _apply(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.type == EntryType.METADATA:
                commands = [decode_command(entry.data)]
            elif entry.type == EntryType.DATA:
                commands = decode_legacy_commands(entry.data)
            else:
                continue
            try:
                results = self.state.apply_entry(entry.index, commands)
            except NewerMetadata as error:
                _halt(str(error))
            for listener in self._listeners:
                try:
                    listener(results)
                except Exception:
                    log.exception("metadata listener failed on entry %d", entry.index)

    def _bootstrap_user_commands(self) -> list[dict[str, Any]]:
        """`[[bootstrap_users]]` never applied yet (each is applied once, the first time a
        leader sees it missing: when the cluster forms, or when the setting is added later)."""
        commands = []
        for number, user in enumerate(self.config.bootstrap_users):
            if user.name in self.state.users.bootstrapped:
                continue
            password = os.environ.get(user.password_env)
            if not password:
                log.error("bootstrap_users[%d] (%s): environment variable %s is not set; user not created",
                          number, user.name, user.password_env)
                continue
            credential = ScramCredential.from_password(user.mechanism, password)
            commands.append(bootstrap_user_command(user.name, credential))
        return commands

    def _after_commit(self, group: RaftGroup) -> None:
        if not group.leader_ready or self._registered_term == group.term:
            return
        self._registered_term = group.term
        commands = []
        me = self.config.node_id
        for member in self.config.members:
            if member.id in self.state.membership.removed:
                continue  # removed for good (cluster/membership.py): a stale config cannot bring it back
            known = self.state.nodes.get(member.id)
            if member.id == me and self.state.nodes_register_themselves:
                own = self.config.own_address
                if known is None or not known.own or own_registration_differs(known, own):
                    commands.append(register_node_command(me, own.client, own.raft, own.listeners, own.rack,
                                                          own=True))
                continue
            if (self.config.join and member.id != me) or (known is not None and known.own):
                continue  # a node's own word counts (it registers itself: server/joining.py)
            if (known is None or known.client != member.client or known.raft != member.raft
                    or known.listeners != member.listeners
                    or (member.rack is not None and known.rack != member.rack)):
                # Registered from this node's `peers` until the node registers itself: a cluster
                # forms with every member known, whichever start first.
                commands.append(register_node_command(member.id, member.client, member.raft, member.listeners,
                                                      member.rack))
        if self.state.cluster_id is None:
            # Forming the cluster: the commands apply in order, so the id comes last and a node
            # that sees it knows every stream adopted here.
            legacy = self._legacy_streams() if self._legacy_streams is not None else []
            commands += [adopt_stream_command(name, self.config.node_id) for name in legacy]
            # Bootstrap users before the id too: a node serves once it sees the id, and its first
            # clients must find the admin user there.
            commands += self._bootstrap_user_commands()
            commands.append(init_cluster_command(new_cluster_id()))
        else:
            commands += self._bootstrap_user_commands()
        for command in commands:
            try:
                group.propose(encode_command(command), EntryType.METADATA)
            except RaftError:
                return


def _halt(message: str) -> None:
    """Stop the node at once, as kill -9 would (which Raft recovery is built for): a clean stop
    could snapshot a state that skipped the command a newer release wrote."""
    log.critical("%s", message)
    print(f"vdl-broker: stopping: {message}", file=sys.stderr, flush=True)
    logging.shutdown()
    os._exit(1)
