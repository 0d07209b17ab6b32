"""DescribeCluster (key 60): the nodes as brokers, with the addresses of the listener the
request came in on (as Metadata gives them), the cluster id, and as controller the metadata
leader (the node that runs admin requests, as Metadata's controller_id says). VDL has no
separate controllers, so endpoint type 2 (KIP-919: controllers) is refused as a Kafka broker
refuses it. Like Metadata it needs no ACL; the cluster's authorized operations are computed
only when asked for (KIP-430)."""

from __future__ import annotations

from vdl_broker.cluster.acls import CLUSTER_NAME
from vdl_broker.server.authorizer import ResourceType, authorized_operations
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers import find_coordinator
from vdl_broker.server.handlers.metadata import listener_brokers
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeClusterRequest, DescribeClusterResponse
from vdl_wire.messages.describe_cluster import AUTHORIZED_OPERATIONS_OMITTED, ENDPOINT_BROKER

API_KEY = DescribeClusterRequest.DECL.api_key
NAME = "DescribeCluster"

Broker = DescribeClusterResponse.DescribeClusterBroker

def cluster_authorized_operations(node: NodeView, context: RequestContext) -> int:
    """KIP-430's bit field: bit `operation` set for each operation allowed on the cluster."""
    return authorized_operations(node, context, ResourceType.CLUSTER, CLUSTER_NAME)


def handle(node: NodeView, context: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    version = context.api_version
    endpoint_type = request.endpoint_type if version >= 1 else ENDPOINT_BROKER
    if endpoint_type != ENDPOINT_BROKER:
        return DescribeClusterResponse(error_code=int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE), endpoint_type=endpoint_type,
                                       error_message="VDL nodes are brokers only (endpoint type 1); "
                                                     "their metadata leader is the controller")
    brokers = [Broker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
               for b in listener_brokers(node, context.protocol)]
    operations = (cluster_authorized_operations(node, context) if request.include_cluster_authorized_operations
                  else AUTHORIZED_OPERATIONS_OMITTED)
    return DescribeClusterResponse(cluster_id=node.cluster_id or "", controller_id=find_coordinator.metadata_leader(node) or -1,
                                   brokers=brokers, cluster_authorized_operations=operations,
                                   endpoint_type=endpoint_type)


def error_response(request: DescribeClusterRequest, version: int, code: ErrorCode) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=int(code))
