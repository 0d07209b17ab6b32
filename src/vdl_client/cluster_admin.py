"""Cluster membership through a VdlClient: nodes (VdlNodes, VDL's own key 10000), replica
reassignments (AlterPartitionReassignments 45, ListPartitionReassignments 46), preferred
leaders (ElectLeaders 43) and the feature level (ApiVersions v3+, UpdateFeatures 57), as
`vdl nodes`, `vdl streams reassign|elect-preferred` and `vdl cluster upgrade` use them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vdl_client.client import VdlClient, api_versions_request
from vdl_client.routes import ANY_NODE, CONTROLLER
from vdl_client.settings import StreamNotFoundError, VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    UpdateFeaturesRequest,
    VdlNodesRequest,
)
from vdl_wire.messages.update_features import METADATA_FEATURE, UPGRADE

PREFERRED = 0  # ElectLeaders election type


@dataclass(frozen=True)
class NodeView:
    node_id: int
    client: str
    raft: str
    rack: str | None
    state: str  # active | joining | decommissioning | removing
    metadata_role: str  # voter | learner | none
    reachable: bool
    leads: int = 0  # streams it leads now
    replicas: int = 0  # streams it holds a replica of


@dataclass(frozen=True)
class Reassignment:
    stream: str
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _nodes_request(client: VdlClient, request: Any, what: str) -> list[Any]:
    response = client.call(CONTROLLER, request, what, error_of=lambda r: r.error_code)
    if response.error_code:
        raise VdlClientError(f"{what}: {ErrorCode(response.error_code).name}: {response.error_message}")
    return list(response.nodes)


def list_nodes(client: VdlClient) -> list[NodeView]:
    """Every node of the cluster, with the streams it leads and holds (from Metadata)."""
    nodes = _nodes_request(client, VdlNodesRequest(action="list"), "list nodes")
    metadata = client.metadata(None)
    leads: dict[int, int] = {}
    holds: dict[int, int] = {}
    for topic in metadata.topics:
        for partition in topic.partitions:
            if partition.leader_id >= 0:
                leads[partition.leader_id] = leads.get(partition.leader_id, 0) + 1
            for replica in partition.replica_nodes:
                holds[replica] = holds.get(replica, 0) + 1
    return [NodeView(n.node_id, n.client, n.raft, n.rack, n.state, n.metadata_role, n.reachable,
                     leads.get(n.node_id, 0), holds.get(n.node_id, 0)) for n in nodes]


def decommission_node(client: VdlClient, node_id: int) -> None:
    """Start moving every replica off `node_id`; the node is removed once it holds none."""
    _nodes_request(client, VdlNodesRequest(action="decommission", node_id=node_id), f"decommission node {node_id}")


def remove_node(client: VdlClient, node_id: int) -> None:
    """A node gone for good: out of the metadata group now, its replicas moved elsewhere."""
    _nodes_request(client, VdlNodesRequest(action="remove", node_id=node_id), f"remove node {node_id}")


def reassign_stream(client: VdlClient, stream: str, replicas: Sequence[int] | None) -> None:
    """Move `stream` to `replicas` (the first: its preferred leader); None cancels a move."""
    request = AlterPartitionReassignmentsRequest(topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
        name=stream, partitions=[AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
            partition_index=0, replicas=None if replicas is None else list(replicas))])])
    what = f"reassign {stream}"

    # The request's error first: with one, the response may carry no partition results.
    response = client.call(CONTROLLER, request, what,
                           error_of=lambda r: r.error_code or r.responses[0].partitions[0].error_code)
    client.check_error(response.error_code, what)
    result = response.responses[0].partitions[0]
    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise StreamNotFoundError(f"{what}: stream does not exist")
    if result.error_code:
        raise VdlClientError(f"{what}: {ErrorCode(result.error_code).name}: {result.error_message}")


def list_reassignments(client: VdlClient, streams: Sequence[str] | None = None) -> list[Reassignment]:
    topics = None if streams is None else [
        ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=s, partition_indexes=[0])
        for s in streams]
    request = ListPartitionReassignmentsRequest(topics=topics)

    response = client.call(CONTROLLER, request, "list reassignments", error_of=lambda r: r.error_code)
    client.check_error(response.error_code, "list reassignments")
    return [Reassignment(t.name, tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
            for t in response.topics for p in t.partitions]


def elect_preferred(client: VdlClient, streams: Sequence[str] | None = None) -> dict[str, tuple[str, str | None]]:
    """Hand every stream (or those named) to its preferred leader; stream -> (outcome, message),
    outcome "elected", "already" (it led already) or the error's name."""
    topics = None if streams is None else [ElectLeadersRequest.TopicPartitions(topic=s, partitions=[0])
                                           for s in streams]
    request = ElectLeadersRequest(election_type=PREFERRED, topic_partitions=topics, timeout_ms=30_000)

    response = client.call(ANY_NODE, request, "elect preferred leaders", error_of=lambda r: r.error_code)
    client.check_error(response.error_code, "elect preferred leaders")
    outcomes: dict[str, tuple[str, str | None]] = {}
    for result in response.replica_election_results:
        for partition in result.partition_result:
            code = partition.error_code
            name = {0: "elected", ErrorCode.ELECTION_NOT_NEEDED: "already"}.get(code) or ErrorCode(code).name
            outcomes[result.topic] = (name, partition.error_message)
    return outcomes


@dataclass(frozen=True)
class FeatureLevels:
    supported: int  # the highest level the metadata leader's release supports (0: none known)
    finalized: int  # the cluster's level


def feature_levels(client: VdlClient) -> FeatureLevels:
    """The cluster's `vdl.metadata.version`, as the metadata leader's ApiVersions tells it."""
    response = client.admin(api_versions_request(), "ApiVersions")
    client.check_error(response.error_code, "ApiVersions")
    supported = max((f.max_version for f in response.supported_features or [] if f.name == METADATA_FEATURE),
                    default=0)
    finalized = max((f.max_version_level for f in response.finalized_features or [] if f.name == METADATA_FEATURE),
                    default=0)
    return FeatureLevels(supported, finalized)


def upgrade_features(client: VdlClient, level: int | None = None, validate_only: bool = False) -> tuple[int, int]:
    """Raise the cluster's feature level to `level` (None: the highest the metadata leader's
    release supports); (level before, level after: the one asked for, also when `validate_only`
    says it may be finalized without changing anything). The leader refuses unless every node
    runs a release that supports it."""
    before = feature_levels(client)
    target = before.supported if level is None else level
    update = UpdateFeaturesRequest.FeatureUpdateKey(feature=METADATA_FEATURE, max_version_level=target,
                                                    upgrade_type=UPGRADE)
    request = UpdateFeaturesRequest(timeout_ms=30_000, feature_updates=[update], validate_only=validate_only)
    what = f"raise {METADATA_FEATURE} to level {target}"
    response = client.admin(request, what)
    results = [(response.error_code, response.error_message)] + [(r.error_code, r.error_message)
                                                                 for r in response.results]
    for code, message in results:
        if code:
            raise VdlClientError(f"{what}: {ErrorCode(code).name}: {message}")
    return before.finalized, target
