"""The cluster's metadata state machine (pure: no I/O, no clock, no randomness).

It holds the cluster id, the nodes and the streams with their replica sets. Every node applies
the same committed entries of the metadata Raft group ("__metadata") in the same order and so
reaches the same state (snapshots: cluster/snapshot.py). A command this release does not know
stops the node instead of being skipped (cluster/features.py).

A command is one JSON object, the payload of one METADATA entry of the metadata log (logs
written by VDL 0.1 carry it as the value of a RecordBatch in a DATA entry; both are read):

    {"op": "init_cluster", "cluster_id": "..."}       the first one applied wins
    {"op": "register_node", "id": 2, "client": "h:9093", "raft": "h:19093",
     "listeners": ["SASL_SSL://h:9093", ...], "rack": "r1", "own": true}
                                                   listeners, rack, own: optional. own: node 2
                                                   describes itself from its own config at start
                                                   (Kafka's broker registration); after that, a
                                                   registration by another node (a metadata
                                                   leader's `peers` entry) leaves it unchanged.
                                                   Without own and without a rack, the known
                                                   rack stays
    {"op": "create_stream", "name": "events", "replication_factor": 3 | null, "config": {...}}
    {"op": "create_stream", "name": "events", "adopt_on": 1, ...}   a 0.1 single-node stream
    {"op": "delete_stream", "name": "events"}
    consumer-group commands (committed offsets, settled generations): see cluster/groups.py
    transaction coordinator commands (producer ids, epochs, states): see cluster/transactions.py
    SCRAM users: see cluster/users.py; ACLs: see cluster/acls.py
    {"op": "alter_stream_config", "name": "events", ...}: see cluster/stream_configs.py
    the feature level ({"op": "finalize_features", ...}): see cluster/features.py
    node states (joining, decommissioning, removing), removed nodes and replica reassignments:
    see cluster/membership.py

Replica sets are chosen when the command is applied (not when proposed), from the state at
that point, so concurrent creations still balance: the first replica is the preferred leader,
picked among the nodes leading the fewest streams, then the rest among the nodes holding the
fewest replicas (ties by node id), among the active nodes (cluster/membership.py). Replication
factor 1, 3 or 5; default 3, or every node when the cluster has fewer.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from vdl_broker.cluster import features as levels  # module globals: tests patch SUPPORTED_LEVEL
from vdl_broker.cluster import snapshot
from vdl_broker.cluster.acls import ACL_OPS, AclsState
from vdl_broker.cluster.features import FEATURE_OPS, FeaturesState, newer_than_supported
from vdl_broker.cluster.groups import GROUP_OPS, GroupsState
from vdl_broker.cluster.membership import MEMBERSHIP_OPS, MembershipState, node_command
from vdl_broker.cluster.stream_configs import (
    CONFIG_OPS,
    ConfigProblem,
    apply_alter,
    sets_unreleased_config,
    validated,
)
from vdl_broker.cluster.topic_ids import ZERO as ZERO_TOPIC_ID
from vdl_broker.cluster.topic_ids import TopicIds
from vdl_broker.cluster.transactions import TXN_OPS, TransactionsState, TxnResult
from vdl_broker.cluster.users import USER_OPS, UsersState
from vdl_wire.records.record_batch import read_records

METADATA_GROUP = "__metadata"  # the Raft group (and directory) of the metadata log
REPLICA_REGISTRY = "__replicas"  # a node's directory naming the replicas it held (server/replica_registry.py)
ALLOWED_REPLICATION_FACTORS = (1, 3, 5)
DEFAULT_REPLICATION_FACTOR = 3
MAX_NAME_LENGTH = 249  # Kafka's topic-name limit
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")  # Kafka's legal topic-name characters
_RESULT_MEMORY = 4096  # results kept for proposers to pick up by Raft index


class Outcome(Enum):
    OK = "ok"
    EXISTS = "exists"  # create of a live stream (Kafka: TOPIC_ALREADY_EXISTS)
    UNKNOWN = "unknown"  # delete of a missing stream (UNKNOWN_TOPIC_OR_PARTITION)
    INVALID_NAME = "invalid_name"  # INVALID_TOPIC_EXCEPTION
    INVALID_REPLICATION_FACTOR = "invalid_replication_factor"  # INVALID_REPLICATION_FACTOR
    INVALID_CONFIG = "invalid_config"  # INVALID_CONFIG
    INVALID_COMMAND = "invalid_command"  # malformed entry: ignored by every node alike


@dataclass(frozen=True)
class NodeInfo:
    id: int
    client: str
    raft: str
    listeners: tuple[str, ...] = ()  # PROTOCOL://host:port of each client listener, if several
    rack: str | None = None  # Kafka's broker.rack (follower reads pick replicas by it)
    # Registered by the node itself (from its own config): another node's `peers` entry for it,
    # often without its rack or listeners, no longer overrides it.
    own: bool = False

    def address_for(self, protocol: str) -> str:
        """Where a client that came in over `protocol` reaches this node."""
        for listener in self.listeners:
            name, _, address = listener.partition("://")
            if name == protocol:
                return address
        return self.client


@dataclass(frozen=True)
class StreamInfo:
    name: str
    replicas: tuple[int, ...]  # replicas[0] is the preferred leader
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)
    created_index: int = 0  # Raft index of the create command: tells incarnations apart
    adopted: bool = False  # its data predates the cluster (a VDL 0.1 single-node directory)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]


@dataclass(frozen=True)
class ApplyResult:
    index: int
    op: str
    outcome: Outcome
    message: str = ""
    stream: StreamInfo | None = None  # created or deleted stream
    node: NodeInfo | None = None
    txn: TxnResult | None = None  # a transaction command's error code and metadata after it

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


# ---------------------------------------------------------------------------------- commands


def register_node_command(node_id: int, client: str, raft: str, listeners: tuple[str, ...] = (),
                          rack: str | None = None, own: bool = False) -> dict[str, Any]:
    return node_command("register_node", node_id, client, raft, listeners, rack, own)


def create_stream_command(name: str, replication_factor: int | None = None,
                          config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"op": "create_stream", "name": name, "replication_factor": replication_factor,
            "config": dict(config or {})}


def adopt_stream_command(name: str, node_id: int) -> dict[str, Any]:
    return {"op": "create_stream", "name": name, "replication_factor": 1, "config": {}, "adopt_on": node_id}


def delete_stream_command(name: str) -> dict[str, Any]:
    return {"op": "delete_stream", "name": name}


def init_cluster_command(cluster_id: str) -> dict[str, Any]:
    # A new cluster starts at the feature level of the release that formed it (cluster/features.py).
    return {"op": "init_cluster", "cluster_id": cluster_id, "feature_level": levels.SUPPORTED_LEVEL}


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def encode_command(command: dict[str, Any]) -> bytes:
    """The payload of a METADATA entry."""
    return json.dumps(command, sort_keys=True, separators=(",", ":")).encode()


def decode_command(payload: bytes | bytearray | memoryview) -> Any:
    """The command of a METADATA entry (None when it is not JSON)."""
    try:
        return json.loads(bytes(payload))
    except (ValueError, RecursionError):
        return None


def decode_legacy_commands(payload: bytes | bytearray | memoryview) -> list[Any]:
    """The commands of a metadata DATA entry written by VDL 0.1: the JSON values of a
    RecordBatch's records (anything undecodable becomes None)."""
    try:
        values = [record.value for record in read_records(payload)]
    except ValueError:
        return [None]
    return [decode_command(value) if value is not None else None for value in values]


def validate_stream_name(name: Any) -> str | None:
    """Why `name` cannot be a stream name, or None when it can."""
    if not isinstance(name, str) or not name:
        return "stream name must be a non-empty string"
    if len(name) > MAX_NAME_LENGTH:
        return f"stream name longer than {MAX_NAME_LENGTH} characters"
    if name in (".", "..") or not _NAME.match(name):
        return f"stream name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'"
    if name in (METADATA_GROUP, REPLICA_REGISTRY):
        return f"{name} is reserved"
    return None


# ---------------------------------------------------------------------------------- state

_BASE_OPS = frozenset({"init_cluster", "register_node", "create_stream", "delete_stream"})
KNOWN_OPS = _BASE_OPS | GROUP_OPS | USER_OPS | ACL_OPS | CONFIG_OPS | MEMBERSHIP_OPS | FEATURE_OPS | TXN_OPS
# The commands of transactions and consumer groups: the most frequent ones (several per
# transaction, one per offset commit), and none changes a stream, its config, a node or the
# membership.
_PLACEMENT_FREE_OPS = TXN_OPS | GROUP_OPS


def changes_placement(results: list[ApplyResult]) -> bool:
    """False when every command of an applied entry leaves the streams, their configs, the nodes
    and the membership as they were: what decides where replicas live and how they run has not
    changed, and the listeners that act on it (a node's replicas, stream moves) can skip it. No
    results at all is a restored snapshot (MetadataService.restore): anything may have changed."""
    return not results or any(result.op not in _PLACEMENT_FREE_OPS for result in results)


class ClusterState:
    """Nodes, streams, consumer groups, users and ACLs; apply() is deterministic.

    Every attribute is annotated here: a snapshot (cluster/snapshot.py) holds exactly these,
    each part serialized by its own declared types. Keep a new part's state in a dataclass of
    plain types (dicts, lists, tuples, sets, bytes, enums, nested dataclasses) and annotate it."""

    # Not in snapshots: recent results kept for proposers; topic ids, computed from the rest.
    TRANSIENT = frozenset({"_results", "_topic_ids"})

    cluster_id: str | None
    nodes: dict[int, NodeInfo]
    streams: StreamTable
    groups: GroupsState
    transactions: TransactionsState
    membership: MembershipState
    users: UsersState
    acls: AclsState
    features: FeaturesState
    applied_index: int

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.nodes: dict[int, NodeInfo] = {}
        self.streams = StreamTable()  # with replica counts per node: placement passes over no stream
        self.groups = GroupsState()
        self.transactions = TransactionsState(numbered=True)  # a snapshot without it says False
        self.membership = MembershipState()
        self.users = UsersState()
        self.acls = AclsState()
        self.features = FeaturesState()
        self.applied_index = 0
        self._results: OrderedDict[int, list[ApplyResult]] = OrderedDict()
        self._topic_ids = TopicIds()

    # -- snapshots

    def snapshot(self) -> bytes:
        """The whole state as bytes (cluster/snapshot.py)."""
        return snapshot.dump(self)

    def load_snapshot(self, data: bytes) -> None:
        """Become the state a snapshot() returned (in place: holders of this object see it)."""
        self.__init__()  # type: ignore[misc]
        snapshot.load(data, self)
        if self.features.level > levels.SUPPORTED_LEVEL:
            raise newer_than_supported(f"a snapshot at feature level {self.features.level}", self.features.level)

    # -- queries

    def topic_id(self, name: str) -> uuid.UUID:
        """The Kafka topic id of stream `name` (topic_ids.py); the zero id for no such stream."""
        info = self.streams.get(name)
        if info is None:
            return ZERO_TOPIC_ID
        return self._topic_ids.id_of(self.cluster_id, name, info.created_index)

    def stream_named_by(self, topic_id: uuid.UUID) -> str | None:
        """The stream whose current incarnation has this topic id."""
        return self._topic_ids.name_of(self.cluster_id, self.streams, topic_id)

    def streams_on(self, node_id: int) -> list[StreamInfo]:
        """The streams with a replica on `node_id`, those being moved onto or off it included."""
        return [s for s in self.streams.values() if node_id in self.membership.hosts(s)]

    @property
    def nodes_register_themselves(self) -> bool:
        """Whether the cluster's feature level lets nodes describe themselves ("own")."""
        return self.features.level >= levels.OWN_REGISTRATION_LEVEL

    def result_for(self, index: int) -> list[ApplyResult] | None:
        """The results of the entry at Raft index `index` (recent entries only)."""
        return self._results.get(index)

    def default_replication_factor(self) -> int:
        return min(DEFAULT_REPLICATION_FACTOR, max(1, len(self.membership.placeable(self.nodes))))

    def check_create(self, name: str, replication_factor: int | None,
                     config: dict[str, Any] | None = None) -> ApplyResult | None:
        """What apply() would refuse now (a proposer answers early), or a config a proposer must
        not write (unknown key, bad value); None if it looks fine."""
        refused = self._refuse_create(0, name, replication_factor, {})
        if refused is None and config:
            try:
                checked = validated(config, replication_factor or self.default_replication_factor())
            except ConfigProblem as problem:
                return ApplyResult(0, "create_stream", Outcome.INVALID_CONFIG, str(problem))
            if (too_new := self.config_level_problem(checked)) is not None:
                return ApplyResult(0, "create_stream", Outcome.INVALID_CONFIG, too_new)
        return refused

    def config_level_problem(self, to_set: Mapping[str, str]) -> str | None:
        """Why a proposer may not write the canonical configs `to_set` at the cluster's level."""
        needed = levels.KEEP_ALL_POLICY_LEVEL
        if sets_unreleased_config(to_set) and self.features.level < needed:
            return (f"cleanup.policy other than delete, the compaction settings, compression.type other than "
                    f"producer and message.timestamp.type=LogAppendTime need {levels.FEATURE_NAME} "
                    f"level {needed}, the cluster is at level {self.features.level}: finalize it with "
                    "`vdl cluster upgrade` once every node runs this release")
        return None

    # -- applying

    def apply_entry(self, index: int, commands: list[Any]) -> list[ApplyResult]:
        """Apply the commands of one committed entry of the metadata group."""
        results = [self.apply(index, command) for command in commands]
        self.applied_index = max(self.applied_index, index)
        self._results[index] = results
        while len(self._results) > _RESULT_MEMORY:
            self._results.popitem(last=False)
        return results

    def apply(self, index: int, command: Any) -> ApplyResult:
        """Apply one command; NewerMetadata (cluster/features.py) when a newer release wrote it."""
        op = command.get("op") if isinstance(command, dict) else None
        if isinstance(op, str) and op not in KNOWN_OPS:
            raise newer_than_supported(f"a {op!r} command at index {index}")
        if isinstance(op, str) and (refused := self.features.refuses(op)) is not None:
            return ApplyResult(index, op, Outcome.INVALID_COMMAND, refused)
        if (op in ("register_node", "join_node") and command.get("own")
                and self.features.level < levels.OWN_REGISTRATION_LEVEL):
            return ApplyResult(index, op, Outcome.INVALID_COMMAND,
                               f"a node's own registration needs feature level {levels.OWN_REGISTRATION_LEVEL}")
        if op == "init_cluster":
            return self._init_cluster(index, command)
        if op == "register_node":
            return self._register_node(index, command)
        if op == "create_stream":
            return self._create_stream(index, command)
        if op == "delete_stream":
            return self._delete_stream(index, command)
        if op in TXN_OPS:
            outcome = self.transactions.apply(op, command)
            if isinstance(outcome, str):
                return ApplyResult(index, op, Outcome.INVALID_COMMAND, outcome)
            by_group: dict[str, dict[str, list[Any]]] = {}
            for pending in outcome.commit_offsets:
                by_group.setdefault(pending.group, {})[pending.stream] = [pending.offset, pending.leader_epoch,
                                                                          pending.metadata]
            for group_id, offsets in by_group.items():
                self.groups.apply("commit_offsets", {"group": group_id, "ts": command["ts"], "offsets": offsets},
                                  set(self.streams))
            return ApplyResult(index, op, Outcome.OK, txn=outcome)
        if op in GROUP_OPS or op in USER_OPS or op in ACL_OPS:
            if op in GROUP_OPS:
                error = self.groups.apply(op, command, set(self.streams))
            elif op in USER_OPS:
                error = self.users.apply(op, command)
            else:
                error = self.acls.apply(op, command)
            if error is not None:
                return ApplyResult(index, op, Outcome.INVALID_COMMAND, error)
            return ApplyResult(index, op, Outcome.OK)
        if op in CONFIG_OPS:
            return self._alter_config(index, command)
        if op in FEATURE_OPS:
            error = self.features.apply(index, command)
            return ApplyResult(index, op, Outcome.OK if error is None else Outcome.INVALID_COMMAND, error or "")
        if op in MEMBERSHIP_OPS:
            error = self.membership.apply(op, command, self.nodes, self.streams)
            if error is not None:
                return ApplyResult(index, op, Outcome.INVALID_COMMAND, error)
            if op == "join_node":
                return replace(self._register_node(index, command), op=op)
            return ApplyResult(index, op, Outcome.OK, stream=self.streams.get(command.get("name", "")))
        return ApplyResult(index, str(op), Outcome.INVALID_COMMAND, f"unknown command {command!r:.200}")

    def _init_cluster(self, index: int, command: dict[str, Any]) -> ApplyResult:
        cluster_id = command.get("cluster_id")
        if not isinstance(cluster_id, str) or not cluster_id:
            return ApplyResult(index, "init_cluster", Outcome.INVALID_COMMAND, "bad init_cluster")
        if self.cluster_id is not None:
            return ApplyResult(index, "init_cluster", Outcome.EXISTS, f"cluster id is {self.cluster_id} already")
        level = command.get("feature_level")
        if isinstance(level, int) and not isinstance(level, bool):
            if level > levels.SUPPORTED_LEVEL:
                raise newer_than_supported(f"a cluster formed at feature level {level}", level)
            self.features.level = max(self.features.level, level)
        self.cluster_id = cluster_id
        return ApplyResult(index, "init_cluster", Outcome.OK)

    def _register_node(self, index: int, command: dict[str, Any]) -> ApplyResult:
        node_id, client, raft = command.get("id"), command.get("client"), command.get("raft")
        listeners = command.get("listeners", [])
        rack, own = command.get("rack"), command.get("own", False)
        if (isinstance(node_id, bool) or not isinstance(node_id, int) or node_id <= 0
                or not isinstance(client, str) or not isinstance(raft, str) or not isinstance(listeners, list)
                or not all(isinstance(item, str) for item in listeners)
                or not (rack is None or (isinstance(rack, str) and rack)) or not isinstance(own, bool)):
            return ApplyResult(index, "register_node", Outcome.INVALID_COMMAND, "bad register_node")
        if node_id in self.membership.removed:
            return ApplyResult(index, "register_node", Outcome.INVALID_COMMAND, f"node {node_id} was removed")
        known = self.nodes.get(node_id)
        if known is not None and known.own and not own:
            return ApplyResult(index, "register_node", Outcome.OK, node=known)  # its own word stands
        if rack is None and known is not None and not own:
            rack = known.rack  # a registrar that does not know the rack keeps it
        node = NodeInfo(node_id, client, raft, tuple(listeners), rack, own)
        self.nodes[node_id] = node
        return ApplyResult(index, "register_node", Outcome.OK, node=node)

    def _refuse_create(self, index: int, name: Any, rf: Any, config: Any) -> ApplyResult | None:
        op = "create_stream"
        reason = validate_stream_name(name)
        if reason is not None:
            return ApplyResult(index, op, Outcome.INVALID_NAME, reason)
        if name in self.streams:
            return ApplyResult(index, op, Outcome.EXISTS, f"stream {name} already exists",
                               stream=self.streams[name])
        if not isinstance(config, dict):
            return ApplyResult(index, op, Outcome.INVALID_CONFIG, "config must be an object")
        if rf is not None:
            if isinstance(rf, bool) or not isinstance(rf, int) or rf not in ALLOWED_REPLICATION_FACTORS:
                return ApplyResult(index, op, Outcome.INVALID_REPLICATION_FACTOR,
                                   f"replication factor must be one of {ALLOWED_REPLICATION_FACTORS}, got {rf!r}")
            active = len(self.membership.placeable(self.nodes))
            if rf > active:
                return ApplyResult(index, op, Outcome.INVALID_REPLICATION_FACTOR,
                                   f"replication factor {rf} exceeds the {active} active node(s) of the cluster")
        if not self.membership.placeable(self.nodes):
            return ApplyResult(index, op, Outcome.INVALID_REPLICATION_FACTOR, "the cluster has no active nodes yet")
        return None

    def _create_stream(self, index: int, command: dict[str, Any]) -> ApplyResult:
        name, rf, config = command.get("name"), command.get("replication_factor"), command.get("config", {})
        refused = self._refuse_create(index, name, rf, config)
        if refused is not None:
            return refused
        assert isinstance(name, str)  # _refuse_create refused any other name
        adopt_on = command.get("adopt_on")
        if adopt_on is not None:
            if adopt_on not in self.nodes:
                return ApplyResult(index, "create_stream", Outcome.INVALID_COMMAND, f"adopt_on: no node {adopt_on!r}")
            replicas: tuple[int, ...] = (adopt_on,)
        else:
            replicas = choose_replicas(self.membership.placeable(self.nodes), self.streams.load,
                                       rf or self.default_replication_factor())
        stream = StreamInfo(name, replicas, dict(config), index, adopted=adopt_on is not None)
        self.streams[name] = stream
        return ApplyResult(index, "create_stream", Outcome.OK, stream=stream)

    def _alter_config(self, index: int, command: dict[str, Any]) -> ApplyResult:
        name = command.get("name")
        stream = self.streams.get(name) if isinstance(name, str) else None
        if stream is None:
            return ApplyResult(index, "alter_stream_config", Outcome.UNKNOWN, f"no stream {name!r}")
        config = apply_alter(stream.config, command)
        if isinstance(config, str):
            return ApplyResult(index, "alter_stream_config", Outcome.INVALID_COMMAND, config)
        stream = self.streams[stream.name] = replace(stream, config=config)
        return ApplyResult(index, "alter_stream_config", Outcome.OK, stream=stream)

    def _delete_stream(self, index: int, command: dict[str, Any]) -> ApplyResult:
        name = command.get("name")
        stream = self.streams.pop(name, None) if isinstance(name, str) else None
        if stream is None or not isinstance(name, str):
            return ApplyResult(index, "delete_stream", Outcome.UNKNOWN, f"no stream {name!r}")
        self.groups.drop_stream(name)
        self.transactions.drop_stream(name)
        self.membership.drop_stream(name)
        return ApplyResult(index, "delete_stream", Outcome.OK, stream=stream)


class StreamTable(dict[str, StreamInfo]):
    """The streams by name, keeping `load` (replicas held and preferred leaderships per node) in
    step with every change, whoever makes it (creates, deletes, replica moves)."""

    def __init__(self) -> None:
        super().__init__()
        self.load = ReplicaLoad()

    def __setitem__(self, name: str, stream: StreamInfo) -> None:
        old = self.get(name)
        if old is not None:
            self.load.remove(old)
        super().__setitem__(name, stream)
        self.load.add(stream)

    def __delitem__(self, name: str) -> None:
        self.load.remove(self[name])
        super().__delitem__(name)

    def pop(self, name: str, *default: Any) -> Any:
        if name in self:
            self.load.remove(self[name])
        return super().pop(name, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for name, stream in dict(*args, **kwargs).items():
            self[name] = stream

    def setdefault(self, name: str, default: Any = None) -> Any:
        if name not in self:
            self[name] = default
        return self[name]

    def popitem(self) -> tuple[str, StreamInfo]:
        name, stream = super().popitem()
        self.load.remove(stream)
        return name, stream

    def clear(self) -> None:
        super().clear()
        self.load = ReplicaLoad()


class ReplicaLoad:
    """How many streams each node holds a replica of, and is the preferred leader of."""

    def __init__(self) -> None:
        self.leads: Counter[int] = Counter()
        self.holds: Counter[int] = Counter()

    def add(self, stream: StreamInfo) -> None:
        if stream.replicas:
            self.leads[stream.replicas[0]] += 1
        self.holds.update(stream.replicas)

    def remove(self, stream: StreamInfo) -> None:
        if stream.replicas:
            self.leads[stream.replicas[0]] -= 1
        self.holds.subtract(stream.replicas)


def choose_replicas(nodes: dict[int, NodeInfo], load: ReplicaLoad, replication_factor: int) -> tuple[int, ...]:
    """Deterministic placement: preferred leader = the node leading the fewest streams (then
    holding the fewest replicas, then lowest id); the others = the nodes holding the fewest
    replicas (then lowest id)."""
    leads, holds = load.leads, load.holds
    ids = sorted(nodes)
    leader = min(ids, key=lambda n: (leads[n], holds[n], n))
    # Rotate the tie order by the leader so followers spread too (not always the lowest ids).
    start = ids.index(leader)
    rotated = ids[start + 1:] + ids[:start]
    others = sorted(rotated, key=lambda n: holds[n])[: replication_factor - 1]
    return (leader, *others)
