"""One node of a VDL cluster (a cluster of one included): its Raft host, the metadata group, the
stream replicas, the group coordinator, producer ids and the client listener.

Membership (a node joining, replicas moving, leaders balanced) runs beside them: the membership
controller (cluster/controller.py, acting on the metadata leader), the stream reassigner
(reassigner.py, on each stream's leader), the leader balancer (leader_balancer.py) and, for a
node started with `join = true`, its join requests (joining.py).

Start order: the Raft host; the metadata group (replayed from its log; a node whose metadata log
is empty first asks its peers whether the cluster exists: joining.formation_at_start); the replica manager,
which opens a Partition per stream placed here as the metadata names them; then, once the
replayed metadata names this node and the cluster id, and every local replica that needs no
other node serves (bounded waits, so a node still starts while the cluster has no quorum), the
client port opens: clients never get an empty or stale answer from a node that just restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from vdl_broker.cluster.controller import MembershipController
from vdl_broker.cluster.features import raft_frame_version
from vdl_broker.cluster.group_configs import GroupConfigBounds
from vdl_broker.cluster.identity import Formation
from vdl_broker.cluster.membership import DECOMMISSIONING, REMOVING
from vdl_broker.cluster.metadata import METADATA_GROUP, ApplyResult
from vdl_broker.cluster.service import MetadataService
from vdl_broker.config import NodeConfig, split_host_port
from vdl_broker.groups.coordinator import CoordinatorConfig
from vdl_broker.groups.service import GroupService
from vdl_broker.listeners import Listener
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.aio_sync import AioSync
from vdl_broker.log.damage import UNKNOWN, DamageRecord
from vdl_broker.log.fileio import atomic_write
from vdl_broker.log.tail_cache import CacheBudget
from vdl_broker.raft.host import RaftHost
from vdl_broker.server import internal
from vdl_broker.server.authorizer import Authorizer
from vdl_broker.server.connection import KafkaConnection
from vdl_broker.server.handlers import Handler, build_handlers
from vdl_broker.server.joining import find_cluster, formation_at_start, registered_itself, watch_departure
from vdl_broker.server.leader_balancer import LeaderBalancer
from vdl_broker.server.producer_state import ProducerIdAllocator
from vdl_broker.server.reassigner import StreamReassigner
from vdl_broker.server.replica_manager import ISR_MAX_LAG_ENTRIES, ReplicaManager
from vdl_broker.server.sasl import Decoys, SaslSession
from vdl_broker.server.tls import client_listener_context, node_id_of, raft_contexts
from vdl_broker.tables.service import TableService
from vdl_broker.transactions.coordinator import TransactionCoordinator
from vdl_broker.transactions.markers import BrokerMarkerWriter

if TYPE_CHECKING:
    from vdl_broker.metrics import BrokerMetrics, MetricsEndpoint
    from vdl_broker.server.node_view import NodeView

log = logging.getLogger(__name__)

METADATA_SEGMENT_BYTES = 4 << 20
# The metadata log's tail cache (memory: payloads and tail_cache.ENTRY_OVERHEAD per entry). Only
# Raft reads this log -- replication to followers and the apply of what commits, both right
# after the append; a node further behind is sent entries read from disk, or a snapshot -- so it
# keeps the last ~10,000 small commands (seconds of the heaviest offset-commit load), not the
# whole log between two truncations behind snapshots: up to two 4 MiB segments, tens of
# thousands of entries (~410 bytes each cached), which filled over the many minutes a segment
# takes to fill (about 15 in the soak) and grew the node's memory by tens of MB all along.
METADATA_TAIL_CACHE_BYTES = 4 << 20
# The Raft addresses of every node this node last knew of (from the metadata): a node restarted
# with the whole cluster must reach nodes that joined after its node.toml was written (the
# transport's lower id dials, so it needs their addresses) before any metadata is applied.
KNOWN_NODES_FILE = "known-nodes.json"
# PLAIN logins cost a PBKDF2 each; they run here, never on the event loop, so a flood of failed
# logins slows other logins at worst, never produce or fetch.
AUTH_THREADS = 2
# Recompressing a produced batch (compression.type) costs up to hundreds of ms for 1 MB (gzip):
# it runs here, never on the event loop. zlib, zstd and lz4 release the GIL while they work.
RECOMPRESS_THREADS = 2


def _producer_id_start(node_id: int) -> int:
    # ProducerIdAllocator spaces starts 2**20 ids per ms: folding the node id into the start
    # time keeps two nodes started in the same millisecond apart.
    return int(time.time() * 1000) * 64 + node_id % 64


def _metrics_registry() -> BrokerMetrics:
    from vdl_broker.metrics import BrokerMetrics

    return BrokerMetrics()


def metadata_log_config(config: NodeConfig) -> LogConfig:
    """The metadata group's log: 4 MiB segments, no retention (it is truncated behind snapshots
    of the state, raft/snapshotting.py), a small tail cache within the node's budget."""
    return LogConfig(segment_bytes=METADATA_SEGMENT_BYTES, fsync=config.fsync,
                     tail_cache_bytes=METADATA_TAIL_CACHE_BYTES)


class Broker:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        raft_listen = split_host_port(config.raft_listen, "raft_listen") if config.raft_listen else None
        # Metrics are counted only when served (metrics_listen): off, nothing is counted at all,
        # and prometheus_client is not even imported (a fifth of a broker's start-up CPU).
        self.metrics = _metrics_registry() if config.metrics_listen else None
        metrics = self.metrics
        self.host = RaftHost(config.node_id, raft_listen, config.raft_peers(),
                             commit_latency=metrics.commit_latency.observe if metrics else None,
                             sync_latency=metrics.fsync_latency.observe if metrics else None,
                             tls=raft_contexts(config), identify=node_id_of,
                             recovery_rate_bytes=config.recovery_rate_bytes)
        if self.host.transport is not None:
            self.host.transport.call_handler = lambda peer, payload: internal.serve(self, peer, payload)
        # One budget for the tail caches of every log here: memory does not grow with the number
        # of streams times a log's cache capacity.
        self.cache_budget = CacheBudget(config.tail_cache_bytes)
        self.aio_sync: AioSync | None = None  # the logs' kernel syncs, from start() on
        self.replicas = ReplicaManager(self)
        self.host.liveness_listeners.append(self._check_cut_off)
        self.tables = TableService(self)
        self.metadata = MetadataService(self.host, config, legacy_streams=self.replicas.legacy_stream_names)
        if self.host.transport is not None:
            self.host.transport.frame_version = lambda: raft_frame_version(self.metadata.state.features.level)
        self.metrics_endpoint: MetricsEndpoint | None = None
        if metrics is not None:
            from vdl_broker.metrics import BrokerCollector
            from vdl_broker.metrics.tables import TableCollector

            metrics.register(BrokerCollector(self, ISR_MAX_LAG_ENTRIES))
            metrics.register(TableCollector(self.tables))
            self.metadata.add_listener(self._forget_deleted_streams)
        self.groups = GroupService(self.metadata, CoordinatorConfig(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms),
            retention_ms=config.offsets_retention_minutes * 60_000,
            retention_check_ms=config.offsets_retention_check_ms,
            metadata_max_bytes=config.offset_metadata_max_bytes,
            consumer_defaults=GroupConfigBounds.of(config))
        self.membership = MembershipController(self.metadata)
        self.reassigner = StreamReassigner(self)
        self.balancer = LeaderBalancer(self, config.leader_balance_interval_ms)
        self._join_task: asyncio.Task[None] | None = None
        self._departure_task: asyncio.Task[None] | None = None
        # Set once the metadata says this node was removed from the cluster (decommissioned or
        # removed): the process then stops (server/main.py), it has nothing left to serve.
        self.removed = asyncio.Event()
        self.producer_ids = ProducerIdAllocator(start_ms=_producer_id_start(config.node_id))
        self.transactions = TransactionCoordinator(
            self.metadata, self.producer_ids.allocate, BrokerMarkerWriter(self),
            expiration_ms=config.transactional_id_expiration_ms,
            expiration_check_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms)
        self.handlers: dict[int, Handler] = build_handlers()
        self.authorizer = Authorizer(config.authorizer, config.super_users, lambda: self.metadata.state.acls)
        self._decoys = Decoys()
        self._auth_executor: ThreadPoolExecutor | None = None
        self._recompress_executor: ThreadPoolExecutor | None = None
        self.connections: set[KafkaConnection] = set()
        self.servers: list[asyncio.Server] = []
        self.port = config.port
        self.ports: dict[str, int] = {lst.protocol: lst.port for lst in config.client_listeners}
        self._retention_task: asyncio.Task[None] | None = None

    @property
    def advertised_host(self) -> str:
        return self.config.client_host

    @property
    def cut_off(self) -> bool:
        """This node has heard from no majority of the metadata group's voters for an election
        timeout: the rest of the cluster goes on without it (server/cut_off.py)."""
        group = self.metadata.group
        if group is None or self.host.transport is None or group.stopped:
            return False
        return not self.host.liveness.in_contact_with_quorum(group.voters, self.node_id)

    def _check_cut_off(self) -> None:
        if self.cut_off:
            log.warning("node %d: cut off from the cluster (no majority heard from): clients are sent to "
                        "the other nodes", self.node_id)
            for partition in self.replicas.all():
                partition.cut_off_now()

    @property
    def cluster_id(self) -> str | None:
        return self.metadata.state.cluster_id

    def node_client_address(self, node_id: int, protocol: str) -> str | None:
        """Where clients of listener `protocol` reach node `node_id` (the metadata's word, else
        the configuration's)."""
        node = self.metadata.state.nodes.get(node_id)
        if node is not None:
            return node.address_for(protocol)
        if node_id == self.node_id:
            return self.own_address(protocol)
        member = next((m for m in self.config.members if m.id == node_id), None)
        return member.client if member is not None else None

    def track_peer(self, node_id: int, raft: str) -> None:
        """Make sure the Raft transport can reach node `node_id` at `raft` (nodes join at run time)."""
        if node_id == self.node_id or self.host.transport is None:
            return
        try:
            address = split_host_port(raft, "raft")
        except ValueError:
            log.warning("node %d: unusable raft address %r", node_id, raft)
            return
        self.host.add_peer(node_id, address)

    def _track_nodes(self, results: list[ApplyResult]) -> None:
        changed = False
        for result in results:
            if result.ok and result.node is not None:
                self.track_peer(result.node.id, result.node.raft)
                changed = True
        if changed or any(r.ok and r.op == "remove_node" for r in results):
            known = {str(n): info.raft for n, info in self.metadata.state.nodes.items()}
            with contextlib.suppress(OSError):  # only a slower start after a full-cluster restart
                atomic_write(Path(self.config.data_dir) / KNOWN_NODES_FILE, json.dumps(known).encode(),
                             durable=False)
        if self.node_id in self.metadata.state.membership.removed:
            self.removed_from_cluster()
        elif (self._departure_task is None
              and self.metadata.state.membership.state_of(self.node_id) in (DECOMMISSIONING, REMOVING)):
            self._departure_task = asyncio.get_running_loop().create_task(watch_departure(self),
                                                                          name="watch-departure")

    def removed_from_cluster(self) -> None:
        if not self.removed.is_set():
            log.warning("node %d was removed from the cluster: stopping", self.node_id)
            self.removed.set()

    def _track_known_nodes(self, data_dir: Path) -> None:
        try:
            known = json.loads((data_dir / KNOWN_NODES_FILE).read_bytes())
        except (OSError, ValueError):
            return
        if isinstance(known, dict):
            for node, raft in known.items():
                if str(node).isdigit() and isinstance(raft, str):
                    self.track_peer(int(node), raft)
    def own_address(self, protocol: str) -> str:
        """This node's advertised address for listener `protocol` (the first listener's if it
        has none of that protocol)."""
        listeners = self.config.client_listeners
        listener = next((lst for lst in listeners if lst.protocol == protocol), listeners[0])
        return self.config.advertised_address(listener, self.ports.get(listener.protocol))

    def sasl_session(self, peer: str) -> SaslSession:
        if self._auth_executor is None:
            self._auth_executor = ThreadPoolExecutor(AUTH_THREADS, thread_name_prefix="vdl-auth")
        return SaslSession(self.config.sasl_mechanisms, lambda: self.metadata.state.users, self._decoys,
                           self._auth_executor, peer)

    def recompress_executor(self) -> ThreadPoolExecutor:
        if self._recompress_executor is None:
            self._recompress_executor = ThreadPoolExecutor(RECOMPRESS_THREADS, thread_name_prefix="vdl-recompress")
        return self._recompress_executor

    async def _listen(self, listener: Listener) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        context = client_listener_context(self.config) if listener.tls else None
        server = await loop.create_server(lambda: KafkaConnection(self, listener), listener.host, listener.port,
                                          reuse_address=True, backlog=1024, ssl=context)
        if server.sockets:
            self.ports[listener.protocol] = server.sockets[0].getsockname()[1]
        return server

    def _note_caught_up(self, _results: list[ApplyResult]) -> None:
        """Rule 2 of vdl_broker.cluster.identity: once the metadata replica has recovered, every
        stream created from then on has its replica in this data directory."""
        group = self.metadata.group
        if self.replicas.registry.catching_up and group is not None and not group.node.recovering:
            self.replicas.registry.caught_up(self.metadata.state.applied_index)

    def _forget_deleted_streams(self, results: list[ApplyResult]) -> None:
        assert self.metrics is not None
        for result in results:
            if result.ok and result.op == "delete_stream" and result.stream is not None:
                self.metrics.forget_stream(result.stream.name)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        data_dir = Path(self.config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        StreamLog.purge_deleted(data_dir)
        if self.config.fsync:
            self.aio_sync = AioSync.open(data_dir)
        if self.metrics is not None and self.config.metrics_listen:
            # First, so a node still waiting for its cluster can be scraped (and a taken port
            # stops the start at once).
            host, port = split_host_port(self.config.metrics_listen, "metrics_listen")
            from vdl_broker.metrics import MetricsEndpoint

            self.metrics_endpoint = MetricsEndpoint(self.metrics, host, port)
            await self.metrics_endpoint.start()
            log.info("node %d: metrics at http://%s:%d/metrics", self.node_id, host or "0.0.0.0",
                     self.metrics_endpoint.port)
        await self.host.start()
        self._track_known_nodes(data_dir)
        try:
            # No retention: the log is truncated behind snapshots of the state (raft/snapshotting.py),
            # in segments small enough that what stays behind the latest snapshot is small too.
            metadata_log = StreamLog.open(data_dir / METADATA_GROUP,
                                          metadata_log_config(self.config),
                                          cache_budget=self.cache_budget, aio=self.aio_sync)
            self.metadata.log = metadata_log  # peers asking what this node holds are told
            catching_up = (metadata_log.last_index == 0 and metadata_log.damage is None
                           and await formation_at_start(self) is Formation.EXISTING)
            self.replicas.registry.open(catching_up)  # first: a crash before the damage record asks again
            if catching_up:
                metadata_log.mark_damaged(DamageRecord(UNKNOWN, 0))
            self.metadata.add_listener(self._note_caught_up)
            self.metadata.add_listener(self.replicas.on_metadata_change)
            self.metadata.add_listener(self._track_nodes)
            self.metadata.add_listener(self.membership.poke)
            self.metadata.add_listener(self.reassigner.on_metadata_change)
            self.replicas.start()
            group = self.metadata.start(metadata_log)
            self.groups.start(group)
            self.transactions.start(group)
            self.membership.start()
            self.reassigner.start()
            self._join_task = asyncio.get_running_loop().create_task(find_cluster(self), name="find-cluster")
            state = self.metadata.state
            # As a Kafka broker, it serves once it has registered itself (server/joining.py); a
            # node its own metadata says was removed never will: it stops without serving.
            metadata_wait_s = self.config.metadata_wait_ms / 1000
            registered = await group.wait_for(lambda _: self.removed.is_set() or (
                registered_itself(self) and state.cluster_id is not None), metadata_wait_s)
            if self.removed.is_set():
                return  # server/main.py stops it
            if not registered:
                log.warning("node %d: starting without the cluster metadata (no metadata leader within %g s)",
                            self.node_id, metadata_wait_s)
            elif not await self.replicas.wait_until_serving(metadata_wait_s):
                log.warning("node %d: starting before every local replica serves", self.node_id)
            loop = asyncio.get_running_loop()
            for listener in self.config.client_listeners:
                self.servers.append(await self._listen(listener))
        except BaseException:  # a failed start, or a stop (SIGTERM) while starting: close what opened
            for server in self.servers:
                server.close()
            await self._stop_raft(transfer=False)
            self.groups.close()
            self.transactions.close()
            self.replicas.close()  # each log with its clean-shutdown marker, as a stop
            if self.metrics_endpoint is not None:
                await self.metrics_endpoint.stop()
            raise
        self.port = self.ports[self.config.client_listeners[0].protocol]
        # Always: any stream may get retention.ms / retention.bytes of its own at any time.
        self._retention_task = loop.create_task(self._retention_loop())
        self.balancer.start()
        self.tables.start()  # after serving: tables/service.py `prepare`
        # The metadata group's voters now, not the `peers` entries (a joining node's name a few).
        log.info("node %d: serving %s (%d voters, raft %s%s)", self.node_id,
                 ", ".join(str(lst) for lst in self.config.client_listeners), len(group.voters),
                 self.config.raft_listen or "none: a cluster of one",
                 ", mutual TLS" if self.config.raft_tls and self.config.raft_listen else "")

    async def _retention_loop(self) -> None:
        next_expiry = time.monotonic() + self.config.producer_id_expiration_check_interval_ms / 1000
        while True:
            wait_s = min(self.config.retention_check_ms / 1000, max(0.0, next_expiry - time.monotonic()))
            await asyncio.sleep(wait_s)
            try:
                self.replicas.apply_retention()
                if time.monotonic() >= next_expiry:
                    next_expiry = time.monotonic() + self.config.producer_id_expiration_check_interval_ms / 1000
                    self.replicas.expire_producers(int(time.time() * 1000))
            except Exception:
                log.exception("retention pass failed")

    async def _stop_raft(self, transfer: bool) -> None:
        for task in (self._join_task, self._departure_task):
            if task is not None:
                task.cancel()
        await self.balancer.stop()
        await self.reassigner.stop()
        await self.membership.stop()
        await self.tables.stop()
        await self.replicas.stop()
        await self.host.stop(transfer=transfer)
        if self.metadata.log is not None:
            self.metadata.log.close()

    async def stop(self) -> None:
        """Graceful: stop accepting, hand every leadership over, then close the logs (each with
        its clean-shutdown marker)."""
        if self._retention_task is not None:
            self._retention_task.cancel()
        for server in self.servers:
            server.close()
        await self._stop_raft(transfer=True)
        for connection in list(self.connections):
            connection.close("broker shutting down")
        self.groups.close()
        self.transactions.close()
        self.replicas.close()
        if self.aio_sync is not None:
            self.aio_sync.close()
        for executor in (self._auth_executor, self._recompress_executor):
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        for server in self.servers:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await server.wait_closed()


if TYPE_CHECKING:
    # The type checker holds the Broker to what its handlers are promised (NodeView).
    _SEEN_BY_HANDLERS: type[NodeView] = Broker
