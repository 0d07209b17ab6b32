"""The stream replicas of this node: one Partition per stream whose replica set holds it.

The metadata group says which streams exist; after every metadata commit the manager reconciles
this node's replicas with it: it opens a Partition and its Raft group for each new stream here
(`<data_dir>/<stream>/`) and removes those of deleted streams. Streams with no replica here are
answered by a RemotePartition (NOT_LEADER_OR_FOLLOWER, the client asks Metadata again).

Incarnations: a stream deleted and created again under the same name is a new Raft group
("<name>#<created index>", so messages of the old group never reach the new one) and a new
directory (the `incarnation` file in it names its create index; a mismatch wipes the directory).
A directory written by a single node of VDL 0.1 (a stream log with no `incarnation` file) is
adopted when the cluster is formed: the metadata records it as a one-replica stream on this
node, and its log opens as it is (its entries have term 1, as that node wrote them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vdl_broker.cluster.metadata import ApplyResult, StreamInfo, changes_placement, validate_stream_name
from vdl_broker.log import DamagedEntry, StreamLog
from vdl_broker.log.damage import UNKNOWN, DamageRecord, save_damage
from vdl_broker.log.fileio import atomic_write
from vdl_broker.raft.group import RaftGroup, campaign_first
from vdl_broker.raft.persistence import load_hard_state, save_hard_state
from vdl_broker.raft.types import HardState
from vdl_broker.server import internal
from vdl_broker.server.cut_off import leader_elsewhere
from vdl_broker.server.partition import Partition, RemotePartition
from vdl_broker.server.replica_registry import ReplicaRegistry
from vdl_broker.server.stream_settings import log_config_for, settings_for, with_settings
from vdl_broker.tables.service import retention_limit
from vdl_wire.api import default_version
from vdl_wire.messages import MetadataRequest

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)

INCARNATION_FILE = "incarnation"
ISR_MAX_LAG_ENTRIES = 1000  # a replica whose match index is within this of the leader is in sync
REMOTE_VIEW_TTL_S = 1.0  # a leader/isr learned from another node is refreshed after this
REMOTE_VIEW_MAX_AGE_S = 3.0  # and no longer used after this
METADATA_RECHECK_S = 0.1  # replicas waiting for a current metadata view look again this often
REOPEN_PAUSE_S = 1.0  # a replica whose group failed opens again after this (_open_again)
REOPEN_PAUSE_MAX_S = 60.0
OPEN_PARALLELISM = 16  # replica logs opened at once (worker threads, mostly waiting on fsyncs)


class ReplicasNotOpened(Exception):
    """Replicas this node should hold could not be opened (each logged with its cause)."""


class ReplicaManager:
    """The streams as the handlers see them: every stream of the cluster; a local Partition for
    those replicated here, a RemotePartition otherwise."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.data_dir = Path(broker.config.data_dir)
        self.registry = ReplicaRegistry(self.data_dir, durable=broker.config.fsync)
        self._partitions: dict[str, Partition] = {}
        self._incarnations: dict[str, int] = {}
        self._opening_new: set[str] = set()  # new replicas (no directory here before) being opened
        self._reopening: set[str] = set()  # replicas whose group failed, closing to be opened again
        self._reopen_pauses: dict[str, tuple[float, float]] = {}  # name -> (when it last failed, pause)
        self._deleted: set[tuple[str, int]] = set()  # (name, created index) of streams deleted
        self._configs: dict[str, dict[str, Any]] = {}  # stream -> the config object its settings came from
        # name -> (time, leader, isr, leader epoch): the leader's own word, from its Metadata answer
        self._remote: dict[str, tuple[float, int, list[int], int]] = {}
        # name -> (time, leader): the leader another replica follows, for a stream whose leader
        # this node cannot hear (its link to the leader cut: `leader_view`).
        self._hearsay: dict[str, tuple[float, int]] = {}
        self._stale: set[str] = set()  # streams whose leader view wants refreshing
        # name -> when a node last answered (or failed to answer) about it; set at each answer
        self._asked: dict[str, float] = {}
        self._views_asked = asyncio.Event()
        self._replica_opened = asyncio.Event()  # set (and replaced) each time a replica opens here
        self._refresher: asyncio.Task[None] | None = None
        self._dirty = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._worker: asyncio.Task[None] | None = None
        self._current = False  # _metadata_current() latched
        self._swept = False  # leftover directories deleted (once the metadata is current)

    # -- the streams ---------------------------------------------------------------------------

    @property
    def state(self) -> Any:
        return self.broker.metadata.state

    def get(self, name: str) -> Partition | RemotePartition | None:
        partition = self._partitions.get(name)
        if partition is not None:
            return partition
        info = self.state.streams.get(name)
        if info is None:
            return None
        return RemotePartition(name, self.leader_view(name, info)[0])

    def legacy_stream_names(self) -> list[str]:
        """Stream directories written by a single node of VDL 0.1 (no incarnation file) that the
        metadata does not know: adopted when the cluster is formed."""
        if not self.data_dir.is_dir():
            return []
        return sorted(directory.name for directory in self.data_dir.iterdir()
                      if directory.is_dir() and validate_stream_name(directory.name) is None
                      and not (directory / INCARNATION_FILE).exists() and directory.name not in self.state.streams
                      and any(directory.glob("*.log")))

    def local(self, name: str) -> Partition | None:
        return self._partitions.get(name)

    def all(self) -> list[Partition]:
        return list(self._partitions.values())

    def __contains__(self, name: str) -> bool:
        return name in self.state.streams

    def apply_retention(self) -> None:
        now_ms = int(time.time() * 1000)
        for partition in self.all():
            group = partition.group
            config = partition.log.config
            if group is not None and not group.stopped and partition.deleted_below > partition.log.log_start_offset:
                # DeleteRecords moved the start: the segments wholly below it go (applied entries only)
                if partition.log.delete_below_offset(partition.deleted_below, group.applied_index):
                    partition.forget_deleted()
            if group is None or group.stopped or (config.retention_ms < 0 and config.retention_bytes < 0):
                continue
            # Raft: retention may drop applied (committed) entries only; on a stream with a
            # table, only entries whose records are all in the table.
            limit = group.applied_index
            if partition.settings is not None and partition.settings.table is not None:
                limit = retention_limit(partition.log, limit, self.broker.tables.tiered_end(partition.name))
            # Never past the last stable offset: an open transaction's records stay with its marker to come.
            stable = partition.last_stable_offset
            if stable < partition.log.log_end_offset:
                limit = min(limit, partition.log.index_for_offset(stable) - 1)
            if partition.log.apply_retention(now_ms, max_index=limit):
                partition.forget_deleted()
                log.info("retention removed segments of %s; log start offset now %d",
                         partition.name, partition.log_start_offset)

    def expire_producers(self, now_ms: int) -> None:
        """Forget every local replica's idle producers: allocated producer ids idle for
        `producer_id_expiration_ms`, writer-keyed ones (the Spark sink's, named like transactional
        ids) for `transactional_id_expiration_ms`."""
        config = self.broker.config
        for partition in self.all():
            if gone := partition.expire_producers(now_ms, config.producer_id_expiration_ms,
                                                  config.transactional_id_expiration_ms):
                log.info("stream %s: %d idle producer ids forgotten", partition.name, gone)

    def close(self) -> None:
        """Close the logs (the Raft groups were stopped before)."""
        for partition in self._partitions.values():
            try:
                partition.close(clean=True)
            except Exception:
                log.exception("closing stream %s failed", partition.name)
        self._partitions.clear()

    # -- leaders as Metadata reports them -------------------------------------------------------

    def leader_view(self, name: str, info: StreamInfo, first_hand: bool = False) -> tuple[int, list[int]]:
        """(leader node id or -1, isr) of a stream as this node knows it. The leader of a local
        replica is known first hand (and its ISR too when it is us); other streams' leaders are
        learned by asking a replica (cached for a second, refreshed in the background). A local
        replica that knows no leader while another replica follows one -- its link to that
        leader cut, the leader still holding a majority through the others (a bridge) -- can win
        no election and would answer "no leader" for as long as the cut lasts, which clients
        ask again, here: it names the leader the other replica follows instead, unless
        `first_hand` (another node asking: what it is told must not come back to it)."""
        partition = self._partitions.get(name)
        if partition is not None and partition.group is not None:
            leader = partition.leader_id or -1
            if leader == self.broker.node_id:
                if not partition.is_leader:
                    return -1, []  # elected, but not serving before its no-op commits
                isr = partition.in_sync_replicas(ISR_MAX_LAG_ENTRIES)
                return leader, isr or [leader]
        else:
            leader = -1
        cached = self._remote.get(name)
        age = time.monotonic() - cached[0] if cached is not None else float("inf")
        if age > REMOTE_VIEW_TTL_S:
            self._refresh_remote(name)
        # A learned view counts while recent; an old one may name a dead leader.
        if cached is not None and age <= REMOTE_VIEW_MAX_AGE_S and (leader < 0 or cached[1] == leader):
            return cached[1], cached[2]
        heard = self._hearsay.get(name)
        if (leader < 0 and not first_hand and heard is not None
                and time.monotonic() - heard[0] <= REMOTE_VIEW_MAX_AGE_S):
            return heard[1], [heard[1]]
        return leader, [leader] if leader > 0 else []

    def learned_leader_epoch(self, name: str, leader: int) -> int:
        """The leader epoch (Raft term) `leader` itself last reported for stream `name`, while
        that word is recent enough to use (REMOTE_VIEW_MAX_AGE_S); -1 if none."""
        cached = self._remote.get(name)
        if cached is None or cached[1] != leader or time.monotonic() - cached[0] > REMOTE_VIEW_MAX_AGE_S:
            return -1
        return cached[3]

    def _view_is_stale(self, name: str, now: float) -> bool:
        """leader_view would answer from a view too old to use: a stream this node does not lead
        whose leader (and ISR) it last learned from its leader more than REMOTE_VIEW_MAX_AGE_S ago."""
        partition = self._partitions.get(name)
        if partition is not None and partition.group is not None and partition.leader_id == self.broker.node_id:
            return False  # known first hand
        cached = self._remote.get(name)
        return cached is None or now - cached[0] > REMOTE_VIEW_MAX_AGE_S

    def _may_answer(self, name: str) -> bool:
        """Some other replica of `name` is not known to be down: asking it may tell its leader."""
        info = self.state.streams.get(name)
        liveness = self.broker.host.liveness
        return info is not None and any(replica != self.broker.node_id and replica in self.state.nodes
                                        and not liveness.is_down(replica)
                                        for replica in self.state.membership.hosts(info))

    async def refresh_stale_views(self, names: list[str], timeout_s: float) -> None:
        """Learn again, waiting at most `timeout_s`, the leader and ISR of those of `names` whose
        view is too old to use. Metadata calls it before answering: a view is otherwise refreshed
        only in the background after a request found it old, so the first Metadata after a few
        quiet seconds named no leader for a stream without a replica here, and only the leader
        as the ISR of one this node follows (kafka-topics --describe
        --under-replicated-partitions listed healthy streams)."""
        now = time.monotonic()
        # Not for streams whose other replicas are all down (or none: one node): no answer would come.
        stale = {name for name in names if name in self.state.streams and self._view_is_stale(name, now)
                 and self._may_answer(name)}
        if not stale:
            return
        self._stale |= stale
        if self._refresher is None or self._refresher.done():
            self._refresher = self.spawn(self._refresh_views())
        # Done once some replica of each answered (or could not be reached): a silent node
        # delays only the streams no other replica answers for, and those by `timeout_s` at most.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while any(self._asked.get(name, -1.0) < now for name in stale):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._views_asked.wait()

    def leader_when_cut_off(self, name: str, info: StreamInfo) -> tuple[int, int]:
        """The leader a cut-off node names for a stream (server/cut_off.py), and its leader
        epoch: itself only while it still serves the stream (every voter is here), else another
        replica. Naming the leader it last knew, the epoch it knew; naming another node, the
        next epoch (the far side elects it in a later term), not -1: a client that took that
        answer then drops as outdated (KIP-320) a follower's Metadata still naming the old
        leader before it learns of the election. With -1, librdkafka (2.16) took both in turn,
        and once the two crossed a partition migration it kept sending to the cut-off node
        while it believed the other the leader ("leader unchanged"): a producer got no
        acknowledgement for its whole 30 s request timeout. -1 when it knows no epoch."""
        me = self.broker.node_id
        partition = self._partitions.get(name)
        if partition is not None and partition.serves_reads:
            return me, partition.leader_epoch
        group = partition.group if partition is not None else None
        voters = group.voters if group is not None else self.state.membership.hosts(info)
        if partition is not None:
            last, epoch = partition.last_leader, partition.leader_epoch
        else:
            cached = self._remote.get(name)
            last, epoch = (cached[1], cached[3]) if cached is not None else (0, -1)
        liveness = self.broker.host.liveness
        leader = leader_elsewhere(name, voters, me, last, liveness.is_alive)
        if leader <= 0 or epoch < 0:
            return leader, -1
        return leader, epoch if leader == last else epoch + 1

    def _refresh_remote(self, name: str) -> None:
        self._stale.add(name)
        if self._refresher is None or self._refresher.done():
            self._refresher = self.spawn(self._refresh_views())

    async def _refresh_views(self) -> None:
        """Ask the replicas of every stream whose view went stale for their leader and ISR: one
        Metadata request per node for all of them (not one per stream), repeated while more
        streams go stale meanwhile."""
        while self._stale:
            names, self._stale = self._stale, set()
            by_node: dict[int, list[str]] = {}
            for name in sorted(names):
                info = self.state.streams.get(name)
                for replica in self.state.membership.hosts(info) if info is not None else ():
                    if replica != self.broker.node_id and replica in self.state.nodes:
                        by_node.setdefault(replica, []).append(name)
            await asyncio.gather(*(self._ask_node(node, asked) for node, asked in by_node.items()))

    async def _ask_node(self, node_id: int, names: list[str]) -> None:
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in names])
        try:
            response = await internal.call(self.broker, node_id, request, default_version(MetadataRequest), 2.0)
        except (OSError, ValueError, TimeoutError):
            self._answered(names)
            return
        now = time.monotonic()
        for topic in response.topics:
            for partition in topic.partitions or []:
                if partition.leader_id == node_id:  # the leader's own word, with its ISR
                    self._remote[topic.name] = (now, node_id, list(partition.isr_nodes), int(partition.leader_epoch))
                elif partition.leader_id > 0 and partition.leader_id != self.broker.node_id:
                    # The leader a replica follows (its first-hand view: nodes ask first_hand).
                    self._hearsay[topic.name] = (now, int(partition.leader_id))
        self._answered(names)

    def _answered(self, names: list[str]) -> None:
        """A node answered about `names` (or could not): wake refresh_stale_views' waiters."""
        now = time.monotonic()
        for name in names:
            self._asked[name] = now
        self._views_asked.set()
        self._views_asked = asyncio.Event()

    def local_replicas_serving(self) -> bool:
        """Every replica the metadata places here is open, and those that need no other node
        (one replica) lead and serve."""
        for info in self.state.streams_on(self.broker.node_id):
            partition = self._partitions.get(info.name)
            if partition is None or self._incarnations.get(info.name) != info.created_index:
                return False
            if self.state.membership.hosts(info) == (self.broker.node_id,) and not partition.is_leader:
                return False
        return True

    async def wait_until_serving(self, timeout_s: float) -> bool:
        """Wait until `local_replicas_serving()` (False on timeout): a restarted node answers its
        first clients with every stream it can serve on its own."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.local_replicas_serving():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            # Replicas opened meanwhile are not in this list: look again at least every 50 ms.
            futures = [partition.changed_future() for partition in self._partitions.values()]
            await asyncio.wait(futures or [loop.create_future()], timeout=min(remaining, 0.05))
            for future in futures:
                future.cancel()
        return True

    def leader_imminent(self, name: str) -> bool:
        """A replica here whose leader is being settled and will be known here in a round trip
        or two: a new stream's (placed here by the metadata and not opened yet, its replica being
        opened, or nothing in its log yet, not even the entry each new leader appends first), or
        this node's own, elected and committing that entry."""
        if name in self._opening_new:
            return True
        partition = self._partitions.get(name)
        if partition is None:
            # Not opened yet (the reconcile loop may be busy with others): new when it has no
            # directory here, as _open_all counts a replica new; a restart's reopening is not,
            # nor a placement in a replayed view that is not the cluster's of now.
            info = self.state.streams.get(name)
            return (info is not None and self.broker.node_id in info.replicas and self._metadata_current()
                    and not (self.data_dir / name).exists())
        return (partition.group is not None and not partition.is_leader
                and (partition.log.last_index == 0 or partition.leader_id == self.broker.node_id))

    async def wait_for_imminent_leaders(self, names: Iterable[str], timeout_s: float) -> None:
        """Wait, at most `timeout_s`, until this node knows the leader of each of `names` whose
        leader is imminent here. Metadata calls it before answering: a client asking right
        after a create was told "no leader", and one that keeps that answer (kafka-go's Writer,
        for 6 s) failed every write meanwhile; Kafka puts a new topic's leader in the record
        that creates it."""
        imminent = [name for name in names if self.leader_imminent(name)]
        if imminent:
            await asyncio.gather(*(self.wait_for_leader(name, timeout_s) for name in imminent))

    async def wait_for_leader(self, name: str, timeout_s: float) -> bool:
        """Wait until some leader of `name` is known here; False on timeout. A local replica is
        watched (woken by its role changes), another stream polled through leader_view."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            partition = self._partitions.get(name)
            if partition is not None and partition.group is not None:
                if partition.is_leader or partition.leader_id not in (0, self.broker.node_id):
                    return True
            else:
                info = self.state.streams.get(name)
                if info is not None and self.leader_view(name, info)[0] > 0:
                    return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            if partition is None:
                # Not opened here yet: woken when a replica opens; a stream led elsewhere and not
                # held here is looked at again every 50 ms (leader_view).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(0.05, remaining)):
                        await self._replica_opened.wait()
                continue
            change = partition.changed_future()
            await asyncio.wait([change], timeout=min(remaining, 0.5))
            change.cancel()

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
        """MetadataService listener (every node, every applied entry). An entry of transactions
        or consumer groups only leaves the replicas as they are: no pass over every stream for
        it (several per transaction otherwise, on every node)."""
        for result in results:
            if result.ok and result.op == "delete_stream" and result.stream is not None:
                self._deleted.add((result.stream.name, result.stream.created_index))
        if changes_placement(results):
            self._dirty.set()

    async def _reconcile_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not isinstance(error, ReplicasNotOpened):  # those were logged one by one
                    log.exception("node %d: reconciling streams with the metadata failed", self.broker.node_id)
                await asyncio.sleep(1.0)
                self._dirty.set()  # try again

    async def reconcile(self) -> None:
        """Make the local replicas match the metadata state: remove the replicas of streams
        deleted (or recreated), delete leftover directories, open the new replicas."""
        node_id = self.broker.node_id
        desired = {info.name: info for info in self.state.streams_on(node_id)}
        current = self._metadata_current()
        for name in list(self._partitions):
            info = desired.get(name)
            if info is None or info.created_index != self._incarnations.get(name):
                if not current:
                    # A restart replays the metadata in steps: a view showing the stream gone from
                    # here may be followed by its coming back (moved away and back since): this
                    # replica's directory is then the current copy, maybe the only one. It goes
                    # only if the view once current still says so.
                    asyncio.get_running_loop().call_later(METADATA_RECHECK_S, self._dirty.set)
                    continue
                await self._remove(name)
        for name, created_index in sorted(self._deleted):
            self._deleted.discard((name, created_index))
            directory = self.data_dir / name
            # A restart replays the metadata after its last snapshot in steps: a deletion may be
            # seen before the stream's re-creation on this node that followed it -- the directory
            # then holds that newer incarnation (maybe its only copy), which the view once
            # current opens (or _delete_leftovers deletes). Only the deleted incarnation's goes.
            found = _incarnation_in(directory)
            if (name not in desired and name not in self._partitions and directory.is_dir()
                    and found in (None, str(created_index))):
                log.info("node %d: deleting the data of stream %s", node_id, name)
                shutil.rmtree(directory, ignore_errors=True)
                self.registry.forget(name)
        if not self._swept:
            if self._metadata_current():
                self._swept = True
                self._delete_leftovers(desired)
            elif self.broker.metadata.group is not None:
                asyncio.get_running_loop().call_later(METADATA_RECHECK_S, self._dirty.set)
        wanted = [info for name, info in desired.items()
                  if name not in self._partitions and name not in self._reopening]
        if wanted and not self._metadata_current():
            # A restart replays the metadata from its last saved commit point: this view may
            # place here a stream that has moved away since (its directory deleted then). Opened
            # now, its replica would start empty with the old replica set as its voters -- one
            # replica: elected at once, acknowledging writes the real replica never sees. Only
            # replicas this node held when it stopped, as a voter in this view too, open before
            # the view is current (their own Raft state decides what they may do); the others
            # wait for it. A held replica this view shows still joining (a move to this node that
            # finished after the last saved commit point) would be wiped as a stale copy
            # (_open_log) -- and it may be the stream's only copy now. So would a directory
            # holding another incarnation (a newer one, when the registry still names this one:
            # the node stopped between deleting its directory and forgetting it).
            held = [info for info in wanted
                    if self.registry.holds(info.name, info.created_index) and node_id in info.replicas
                    and _incarnation_in(self.data_dir / info.name) in (None, str(info.created_index))]
            if len(held) < len(wanted):
                asyncio.get_running_loop().call_later(METADATA_RECHECK_S, self._dirty.set)
            wanted = held
        if wanted:
            await self._open_all(wanted)
        for name, partition in self._partitions.items():
            # A config change is a new config object (cluster/stream_configs.apply_alter).
            info = self.state.streams.get(name)
            if info is not None and self._configs.get(name) is not info.config:
                self._apply_settings(partition, info)

    def _delete_leftovers(self, desired: dict[str, StreamInfo]) -> None:
        """Once this node's metadata is current: delete the stream directories left from replicas
        it no longer holds -- moved away or deleted while it was down (or before it deleted them),
        which nothing else would remove until the stream came back here. Only directories naming
        their incarnation (a 0.1 directory without one waits for its adoption)."""
        if not self.data_dir.is_dir():
            return
        for directory in sorted(self.data_dir.iterdir()):
            name = directory.name
            if (name in desired or name in self._partitions or validate_stream_name(name) is not None
                    or not (directory / INCARNATION_FILE).is_file()):
                continue
            log.info("node %d: deleting %s, left from a replica of stream %s this node no longer holds",
                     self.broker.node_id, directory, name)
            shutil.rmtree(directory, ignore_errors=True)
            self.registry.forget(name)

    def _metadata_current(self) -> bool:
        """This node's metadata state is the cluster's of now (not a replay of an older one): it
        leads the metadata group, or it holds and has applied the commit index its leader
        reported since this node started. Once true, it stays so (later lag is ordinary Raft
        lag: entries apply in order, so a replica placed here is opened before it is moved)."""
        if self._current:
            return True
        group = self.broker.metadata.group
        if group is None:
            return False
        node = group.node
        self._current = group.leader_ready or (
            group.leader_id not in (0, self.broker.node_id) and node.leader_commit > 0
            and group.applied_index >= node.leader_commit)
        return self._current

    def _apply_settings(self, partition: Partition, info: StreamInfo) -> None:
        """The stream's config as this replica applies it (segment roll, retention, size limit)."""
        self._configs[info.name] = info.config
        settings = settings_for(self.config, info.config)
        if settings != partition.settings:
            partition.settings = settings
            partition.log.config = with_settings(partition.log.config, settings)
            log.info("node %d: stream %s settings now %s", self.broker.node_id, info.name, settings)

    async def _open_all(self, wanted: list[StreamInfo]) -> None:
        """Open new replicas: the disk work (directory, segment scan and checks, indexes) in
        worker threads, OPEN_PARALLELISM at a time, each Raft group started on the event loop as
        soon as its log is open -- a node with thousands of streams serves the first ones at once
        and never stalls its event loop (heartbeats, clients) on the rest."""
        limit = asyncio.Semaphore(OPEN_PARALLELISM)

        async def one(info: StreamInfo) -> None:
            if not (self.data_dir / info.name).exists():
                self._opening_new.add(info.name)
            try:
                async with limit:
                    if self.state.streams.get(info.name) != info or info.name in self._partitions:
                        return  # deleted or opened meanwhile
                    stream_log = await asyncio.to_thread(self._open_log, info)
                if self.state.streams.get(info.name) != info or info.name in self._partitions:
                    stream_log.close()
                    return
                self._start_replica(info, stream_log)
            finally:
                self._opening_new.discard(info.name)

        results = await asyncio.gather(*(one(info) for info in wanted), return_exceptions=True)
        failed = [(info.name, r) for info, r in zip(wanted, results, strict=True) if isinstance(r, BaseException)]
        for name, error in failed:
            # A full or failing disk is told in one line (it is tried again every second); anything
            # else with its traceback.
            log.error("node %d: cannot open the replica of stream %s: %r", self.broker.node_id, name, error,
                      exc_info=None if isinstance(error, OSError) else error)
        if failed:
            raise ReplicasNotOpened(f"{len(failed)} replicas failed to open, e.g. {failed[0][0]}")

    def _open_log(self, info: StreamInfo) -> StreamLog:
        """Blocking (a worker thread): the stream's directory for this incarnation, its log open."""
        directory = self.data_dir / info.name
        marker = directory / INCARNATION_FILE
        expected = str(info.created_index)
        # Lost: held before in this directory (registry), or maybe on a lost disk (identity.py, rule 2;
        # a replica joining by a reassignment is a learner anyway).
        held = self.registry.holds(info.name, info.created_index)
        lost = not marker.exists() and (held or (
            self.broker.node_id in info.replicas and self.registry.may_have_held(info.created_index)))
        why = "lost its directory"
        if directory.exists() and self.broker.node_id not in info.replicas:
            # A replica joining by a reassignment starts empty, as a learner of the current group.
            # A directory here is a copy left from an earlier placement (the node stopped or
            # crashed before deleting it when the stream moved away): its log, Raft state and
            # configuration are stale -- opened, a configuration naming this node the only voter
            # would elect it on that old log and lose every record written since. If it was a
            # replica in this reassignment already (a restart half-way), its acknowledgements
            # may count: it starts damaged, voting for no one until the leader gave its log back.
            log.warning("node %d: %s holds a stale copy of stream %s, which joins this node by a reassignment: "
                        "wiping it", self.broker.node_id, directory, info.name)
            shutil.rmtree(directory)
            lost, why = True, "starts empty in place of that stale copy"
        if directory.exists():
            found = _incarnation_in(directory) or ""
            noted = found.isascii() and found.isdigit() and self.registry.holds(info.name, int(found))
            if found != expected and held and marker.exists() and not noted:
                # This node noted this incarnation here (the registry's note follows the file's
                # write) and never the one the file names, so it is the file that is damaged, not
                # the directory's data -- which the log's open checks as ever. Wiping it would
                # lose what may be the only copy, and silently: an empty replica that votes.
                log.warning("node %d: %s: its incarnation file reads %r, but this node noted incarnation %s of "
                            "stream %s here: rewriting the file", self.broker.node_id, directory, found, expected,
                            info.name)
                atomic_write(marker, expected.encode(), durable=self.config.fsync)
            elif found != expected and not (info.adopted and not found):
                log.warning("node %d: %s holds another incarnation of stream %s (%r, now %s): wiping it",
                            self.broker.node_id, directory, info.name, found, expected)
                shutil.rmtree(directory)
        if not directory.exists():
            directory.mkdir(parents=True)
        if lost:
            log.error("node %d: the replica of stream %s %s (%s): it votes for no one until a leader has given "
                      "its log back", self.broker.node_id, info.name, why, directory)
            save_damage(directory, DamageRecord(UNKNOWN, 0), durable=self.config.fsync)
        if not marker.exists():
            atomic_write(marker, expected.encode(), durable=self.config.fsync)
        self.registry.add(info.name, info.created_index)
        settings = settings_for(self.config, info.config)
        stream_log = StreamLog.open(directory, log_config_for(self.config, settings),
                                    cache_budget=self.broker.cache_budget, aio=self.broker.aio_sync)
        if info.adopted:
            _raise_term_to_log(stream_log)
        return stream_log

    def _start_replica(self, info: StreamInfo, stream_log: StreamLog) -> None:
        settings = settings_for(self.config, info.config)
        partition = Partition(info.name, stream_log, self.broker.node_id, settings)
        self._configs[info.name] = info.config
        group: RaftGroup | None = None
        # A replica the stream was created with starts from its replica set (used only if it has
        # no saved configuration yet); one added by a reassignment joins knowing no voters.
        voters = info.replicas if self.broker.node_id in info.replicas else ()
        try:
            group = self.broker.host.create_group(
                f"{info.name}#{info.created_index}", voters, stream_log, apply=partition.on_apply,
                on_snapshot=partition.on_snapshot, resume_from_commit_point=True,
                on_failure=partial(self._failed, partition))
            partition.attach(group)
        except Exception:
            if group is None:
                stream_log.close()
            else:  # unregister it now, so the next reconcile can open the stream again
                self.broker.host.groups.pop(group.name, None)
                self.spawn(_discard(group, stream_log))
            raise
        self._partitions[info.name] = partition
        self._incarnations[info.name] = info.created_index
        self._replica_opened.set()
        self._replica_opened = asyncio.Event()
        log.info("node %d: replica of stream %s open (replicas %s, offsets %d..%d)", self.broker.node_id,
                 info.name, list(info.replicas), stream_log.log_start_offset, stream_log.log_end_offset)
        if stream_log.last_index == 0 and info.preferred_leader == self.broker.node_id and len(info.replicas) > 1:
            campaign_first(group)

    def _failed(self, partition: Partition, error: BaseException) -> None:
        self.spawn(self._open_again(partition, error))

    async def _open_again(self, partition: Partition, error: BaseException) -> None:
        """The replica's group stopped on its own (RaftGroup.failure): close the log and open it
        again as at a start -- a replica's restart, which Raft is built for -- rather than leave
        it closed until the node restarts. An entry that failed its CRC (a byte flipped on disk
        while the node runs; RaftGroup.storage_damaged) opens again at once, checking every entry
        from its segment on: the open cuts the log at the damage and records it, and the replica
        recovers the range from a peer (raft/recovery.py). Any other failure (an error the group
        could not recover from) opens again after a pause, doubled while failures repeat, so one
        that recurs at every open does not spin."""
        name = partition.name
        if self._partitions.get(name) is not partition:
            return
        self._reopening.add(name)  # no reconcile opens it while this log is still open
        try:
            try:
                await self._detach(name)
                partition.close(clean=True, failed=True)
                if isinstance(error, DamagedEntry):
                    partition.log.check_again_from(error.segment_base)
            except Exception as failure:  # noqa: BLE001 - a full disk besides, or more damage: the
                # replica opens again all the same (its open checks what it has no record of); left
                # closed, nothing but a placement change or a restart would open it.
                log.error("node %d: closing the replica of stream %s failed (%s)", self.broker.node_id, name,
                          failure)
            if isinstance(error, DamagedEntry):
                log.error("node %d: the replica of stream %s is opened again to check its log from entry %d on",
                          self.broker.node_id, name, error.segment_base)
            else:
                pause = self._reopen_pause(name)
                log.error("node %d: the replica of stream %s failed (%s); it opens again in %.0f s",
                          self.broker.node_id, name, error, pause)
                await asyncio.sleep(pause)
        finally:
            self._reopening.discard(name)
            self._dirty.set()

    def _reopen_pause(self, name: str) -> float:
        """REOPEN_PAUSE_S after a replica's first failure; twice the last pause (up to
        REOPEN_PAUSE_MAX_S) after one that failed again within REOPEN_PAUSE_MAX_S of opening."""
        now = time.monotonic()
        last, pause = self._reopen_pauses.get(name, (float("-inf"), 0.0))
        opened = last + pause  # when it opened again after its last failure
        pause = min(2 * pause, REOPEN_PAUSE_MAX_S) if now - opened < REOPEN_PAUSE_MAX_S else REOPEN_PAUSE_S
        self._reopen_pauses[name] = (now, pause)
        return pause

    async def _remove(self, name: str) -> None:
        log.info("node %d: removing the replica of stream %s", self.broker.node_id, name)
        partition = await self._detach(name)
        partition.close(clean=False)
        partition.log.delete()
        self.registry.forget(name)

    async def _detach(self, name: str) -> Partition:
        """Forget the replica of `name` here and stop its Raft group; its log is still open."""
        partition = self._partitions.pop(name)
        self._incarnations.pop(name, None)
        self._configs.pop(name, None)
        if partition.group is not None:
            await self.broker.host.remove_group(partition.group.name)
        return partition

    def spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        """Run a background task owned by this node (cancelled at stop)."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _incarnation_in(directory: Path) -> str | None:
    """The incarnation (create index) a stream directory names, or None (none, unreadable); a
    damaged file's bytes as they decode (never an exception: they are compared, not trusted)."""
    try:
        return (directory / INCARNATION_FILE).read_bytes().decode(errors="replace").strip() or None
    except OSError:
        return None


async def _discard(group: RaftGroup, stream_log: StreamLog) -> None:
    await group.stop(transfer=False)
    stream_log.close()


def _raise_term_to_log(stream_log: StreamLog) -> None:
    """A 0.1 single-node log holds term-1 entries but no Raft hard state: Raft requires the
    current term to be at least the last entry's, so record it before the group starts."""
    last_term = stream_log.term_at(stream_log.last_index) if stream_log.last_index >= stream_log.first_index else 0
    try:
        state = load_hard_state(stream_log.directory)
    except ValueError:
        return  # unreadable: the Raft group treats it as damage (raft.persistence.load_raft_state)
    if state.term < last_term:
        save_hard_state(stream_log.directory, HardState(last_term, state.voted_for))
