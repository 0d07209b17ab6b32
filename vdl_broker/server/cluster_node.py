"""Cluster mode (issue 5): `vdl-broker --config node.toml` with raft_listen/peers.

A ClusterBroker is the single-node Broker with three things swapped in:
- a RaftHost (one transport and ticker for every group of this node) and the MetadataService
  over the "__metadata" group (all nodes vote; nodes, streams and replica sets);
- ClusterStreams instead of StreamRegistry: one RaftPartition per stream whose replica set holds
  this node, created and removed by reconciling with the metadata state after every metadata
  commit; the stream's StreamLog is <data_dir>/<stream>/, the metadata log <data_dir>/__metadata/;
- the Metadata, CreateTopics, DeleteTopics and FindCoordinator handlers of
  vdl_broker.server.cluster_handlers (the others are the single-node ones: they see the same
  partition seam, with NOT_LEADER_OR_FOLLOWER on a non-leader).

Incarnations: a stream deleted and created again under the same name is a new Raft group
("<name>#<created index>", so messages of the old group never reach the new one) and a new
directory (the `incarnation` file in it names its create index; a mismatch wipes the directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from vdl_broker.cluster.config import NodeConfig, split_host_port
from vdl_broker.cluster.metadata import METADATA_GROUP, ApplyResult, StreamInfo
from vdl_broker.cluster.service import MetadataService
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.fileio import atomic_write
from vdl_broker.protocol.messages import MetadataRequest
from vdl_broker.raft.driver import RaftGroup, RaftHost
from vdl_broker.server.broker import Broker
from vdl_broker.server.cluster_handlers import install, kafka_request
from vdl_broker.server.config import BrokerConfig
from vdl_broker.server.producer_state import ProducerIdAllocator
from vdl_broker.server.raft_partition import RaftPartition, RemotePartition
from vdl_broker.server.streams import log_config_for

log = logging.getLogger(__name__)

INCARNATION_FILE = "incarnation"
ISR_MAX_LAG_ENTRIES = 1000  # a replica whose match index is within this of the leader is in sync
REMOTE_VIEW_TTL_S = 1.0  # a leader/isr learned from another node is refreshed after this
REMOTE_VIEW_MAX_AGE_S = 3.0  # and no longer used after this
FIRST_CAMPAIGN_DELAY_S = 0.3  # a fresh stream's preferred leader campaigns this soon (not after 1-2 s)
METADATA_API_KEY, METADATA_VERSION = 3, 1
METADATA_WAIT_S = 10.0  # how long a starting node waits for the metadata before serving clients


class ClusterStreams:
    """The streams as the handlers see them (StreamRegistry's interface): every stream of the
    cluster; a local RaftPartition for those replicated here, a RemotePartition otherwise."""

    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self.config = broker.config
        self.data_dir = Path(broker.config.data_dir)
        self._partitions: dict[str, RaftPartition] = {}
        self._incarnations: dict[str, int] = {}
        self._deleted: set[str] = set()
        self._remote: dict[str, tuple[float, int, list[int]]] = {}  # name -> (time, leader, isr)
        self._refreshing: set[str] = set()
        self._dirty = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._worker: asyncio.Task[None] | None = None

    # -- StreamRegistry's interface ------------------------------------------------------------

    @property
    def state(self) -> Any:
        return self.broker.metadata.state

    def open_all(self) -> None:
        """Nothing to scan: the metadata log says which streams exist (see `reconcile`)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        StreamLog.purge_deleted(self.data_dir)

    def get(self, name: str) -> RaftPartition | RemotePartition | None:
        partition = self._partitions.get(name)
        if partition is not None:
            return partition
        info = self.state.streams.get(name)
        if info is None:
            return None
        return RemotePartition(name, self.leader_view(name, info)[0])

    def local(self, name: str) -> RaftPartition | None:
        return self._partitions.get(name)

    def names(self) -> list[str]:
        return sorted(self.state.streams)

    def all(self) -> list[RaftPartition]:
        return list(self._partitions.values())

    def __contains__(self, name: str) -> bool:
        return name in self.state.streams

    def apply_retention(self) -> None:
        now_ms = int(time.time() * 1000)
        for partition in self.all():
            group = partition.group
            if group is None or group.stopped:
                continue
            # Raft: retention may drop applied (committed) entries only.
            if partition.log.apply_retention(now_ms, max_index=group.applied_index):
                log.info("retention removed segments of %s; log start offset now %d",
                         partition.name, partition.log_start_offset)

    def close(self) -> None:
        """Close the logs (the Raft groups were stopped before)."""
        for partition in self._partitions.values():
            try:
                partition.close(clean=True)
            except Exception:
                log.exception("closing stream %s failed", partition.name)
        self._partitions.clear()

    # -- leaders as Metadata reports them -------------------------------------------------------

    def leader_view(self, name: str, info: StreamInfo) -> tuple[int, list[int]]:
        """(leader node id or -1, isr) of a stream as this node knows it. The leader of a local
        replica is known first hand (and its ISR too when it is us); other streams' leaders are
        learned by asking a replica (cached for a second, refreshed in the background)."""
        partition = self._partitions.get(name)
        if partition is not None and partition.group is not None:
            leader = partition.leader_id or -1
            if leader == self.broker.node_id:
                isr = partition.in_sync_replicas(ISR_MAX_LAG_ENTRIES)
                return leader, isr or [leader]
        else:
            leader = -1
        cached = self._remote.get(name)
        age = time.monotonic() - cached[0] if cached is not None else float("inf")
        if age > REMOTE_VIEW_TTL_S:
            self._refresh_remote(name, info)
        # A learned view counts while recent; an old one may name a dead leader.
        if cached is not None and age <= REMOTE_VIEW_MAX_AGE_S and (leader < 0 or cached[1] == leader):
            return cached[1], cached[2]
        return leader, [leader] if leader > 0 else []

    def _refresh_remote(self, name: str, info: StreamInfo) -> None:
        if name in self._refreshing:
            return
        self._refreshing.add(name)
        self.spawn(self._ask_replicas(name, info))

    async def _ask_replicas(self, name: str, info: StreamInfo) -> None:
        try:
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)])
            for replica in info.replicas:
                node = self.state.nodes.get(replica)
                if replica == self.broker.node_id or node is None:
                    continue
                try:
                    response = await kafka_request(node.client, METADATA_API_KEY, METADATA_VERSION, request, 1.0)
                except (OSError, ValueError, TimeoutError):
                    continue
                for topic in response.topics:
                    for partition in topic.partitions if topic.name == name else []:
                        if partition.leader_id == replica:  # the leader's own word, with its ISR
                            self._remote[name] = (time.monotonic(), replica, list(partition.isr_nodes))
                            return
        finally:
            self._refreshing.discard(name)

    async def wait_for_leader(self, name: str, timeout_s: float) -> bool:
        """Wait (polling) until some leader of `name` is known here; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.state.streams.get(name)
            if info is not None and self.leader_view(name, info)[0] > 0:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)

    # -- following the metadata -------------------------------------------------------------------

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(self._reconcile_loop(), name="cluster-streams")

    async def stop(self) -> None:
        for task in [self._worker, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def on_metadata_change(self, results: list[ApplyResult]) -> None:
        """MetadataService listener (every node, every applied entry)."""
        for result in results:
            if result.ok and result.op == "delete_stream" and result.stream is not None:
                self._deleted.add(result.stream.name)
        self._dirty.set()

    async def _reconcile_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("node %d: reconciling streams with the metadata failed", self.broker.node_id)
                await asyncio.sleep(1.0)
                self._dirty.set()  # try again

    async def reconcile(self) -> None:
        """Make the local replicas match the metadata state: remove the replicas of streams
        deleted (or recreated), delete leftover directories, open the new replicas."""
        node_id = self.broker.node_id
        desired = {info.name: info for info in self.state.streams_on(node_id)}
        for name in list(self._partitions):
            info = desired.get(name)
            if info is None or info.created_index != self._incarnations.get(name):
                await self._remove(name)
        for name in sorted(self._deleted):
            self._deleted.discard(name)
            directory = self.data_dir / name
            if name not in desired and name not in self._partitions and directory.is_dir():
                log.info("node %d: deleting the data of stream %s", node_id, name)
                shutil.rmtree(directory, ignore_errors=True)
        for name, info in desired.items():
            if name not in self._partitions and self.state.streams.get(name) == info:
                self._open(info)

    def _open(self, info: StreamInfo) -> None:
        directory = self.data_dir / info.name
        marker = directory / INCARNATION_FILE
        expected = str(info.created_index)
        if directory.exists():
            try:
                found = marker.read_text().strip()
            except OSError:
                found = ""
            if found != expected:
                log.warning("node %d: %s holds another incarnation of stream %s (%r, now %s): wiping it",
                            self.broker.node_id, directory, info.name, found, expected)
                shutil.rmtree(directory)
        if not directory.exists():
            directory.mkdir(parents=True)
            atomic_write(marker, expected.encode(), durable=self.config.fsync)
        stream_log = StreamLog.open(directory, log_config_for(self.config))
        partition = RaftPartition(info.name, stream_log, self.broker.node_id)
        try:
            group = self.broker.host.create_group(
                f"{info.name}#{info.created_index}", info.replicas, stream_log, apply=partition.on_apply,
                on_snapshot=partition.on_snapshot, resume_from_commit_point=True)
            partition.attach(group)
        except Exception:
            stream_log.close()
            raise
        self._partitions[info.name] = partition
        self._incarnations[info.name] = info.created_index
        log.info("node %d: replica of stream %s open (replicas %s, offsets %d..%d)", self.broker.node_id,
                 info.name, list(info.replicas), stream_log.log_start_offset, stream_log.log_end_offset)
        if stream_log.last_index == 0 and info.preferred_leader == self.broker.node_id and len(info.replicas) > 1:
            asyncio.get_running_loop().call_later(FIRST_CAMPAIGN_DELAY_S, _campaign_if_leaderless, group)

    async def _remove(self, name: str) -> None:
        partition = self._partitions.pop(name)
        self._incarnations.pop(name, None)
        log.info("node %d: removing the replica of stream %s", self.broker.node_id, name)
        if partition.group is not None:
            await self.broker.host.remove_group(partition.group.name)
        partition.close(clean=False)
        partition.log.delete()

    def spawn(self, coroutine: Any) -> None:
        """Run a background task owned by this node (cancelled at stop)."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _campaign_if_leaderless(group: RaftGroup) -> None:
    """A new stream's replicas all start as followers: without this its first election waits
    1-2 election timeouts; the preferred leader (replicas[0]) asks for votes at once instead."""
    if not group.stopped and group.leader_id == 0:
        group.node.campaign()
        group.tick()  # wakes the group's Ready loop


def _producer_id_start(node_id: int) -> int:
    # ProducerIdAllocator spaces starts 2**20 ids per ms: folding the node id into the start
    # time keeps two nodes started in the same millisecond apart.
    return int(time.time() * 1000) * 64 + node_id % 64


class ClusterBroker(Broker):
    """A node of a replicated cluster (see the module docstring)."""

    def __init__(self, config: BrokerConfig) -> None:
        super().__init__(config)
        assert config.raft_listen is not None
        self.node_config = NodeConfig(config.node_id, Path(config.data_dir), f"{config.client_host}:{config.port}",
                                      config.raft_listen, list(config.peers))
        members = ",".join(f"{m.id}={m.raft}" for m in self.node_config.members)
        self.cluster_id = "vdl-" + hashlib.sha256(members.encode()).hexdigest()[:16]
        self.producer_ids = ProducerIdAllocator(start_ms=_producer_id_start(config.node_id))
        self.host = RaftHost(config.node_id, split_host_port(config.raft_listen, "raft_listen"),
                             self.node_config.raft_peers())
        self.metadata: MetadataService | None = None
        self.streams = ClusterStreams(self)  # type: ignore[assignment]
        install(self.handlers)

    def node_client_address(self, node_id: int) -> str | None:
        node = self.metadata.state.nodes.get(node_id) if self.metadata is not None else None
        if node is not None:
            return node.client
        member = next((m for m in self.node_config.members if m.id == node_id), None)
        return member.client if member is not None else None

    async def start(self) -> None:
        await self.host.start()
        try:
            meta_dir = Path(self.config.data_dir) / METADATA_GROUP
            # No retention: the metadata log is replayed from its start on every node start.
            meta_log = StreamLog.open(meta_dir, LogConfig(segment_bytes=64 << 20, fsync=self.config.fsync))
            self.metadata = MetadataService(self.host, self.node_config, meta_log)
            self.metadata.add_listener(self.streams.on_metadata_change)
            self.streams.start()
            group = self.metadata.start()
            await self._wait_for_metadata(group)
            await super().start()
        except BaseException:
            await self._stop_raft(transfer=False)
            raise
        log.info("node %d: cluster member (raft %s, %d voters)", self.node_id, self.config.raft_listen,
                 len(self.node_config.members))

    async def _wait_for_metadata(self, group: RaftGroup) -> None:
        """Open the client port only once the replayed metadata names this node: clients then
        never get an empty or stale Metadata answer from a node that just (re)started. Bounded,
        so a node still starts (and serves what it can) while the cluster has no quorum."""
        metadata = self.metadata
        assert metadata is not None
        if not await group.wait_for(lambda _: self.node_id in metadata.state.nodes, METADATA_WAIT_S):
            log.warning("node %d: starting without the cluster metadata (no metadata leader within %.0f s)",
                        self.node_id, METADATA_WAIT_S)

    async def _stop_raft(self, transfer: bool) -> None:
        await self.streams.stop()
        await self.host.stop(transfer=transfer)
        if self.metadata is not None:
            self.metadata.log.close()

    async def stop(self) -> None:
        """Graceful: stop accepting, hand every leadership over, then close the logs."""
        if self.server is not None:
            self.server.close()
        await self._stop_raft(transfer=True)
        await super().stop()
