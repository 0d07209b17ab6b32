"""ListConfigResources (key 74; v0 was KIP-714's ListClientMetricsResources, v1 KIP-1142): the
config resources of the types asked for (v1: none asked = every type served; v0: client metrics
only). As Kafka's broker answers: TOPIC the streams, BROKER and BROKER_LOGGER the nodes, GROUP
the groups with configs of their own (cluster/group_configs.py), and CLIENT_METRICS the
client-metrics subscriptions -- none, VDL collects no client metrics -- so
`kafka-client-metrics --list` and `kafka-configs --describe --entity-type client-metrics` list
nothing, as on a Kafka cluster where none was set. Another type is UNSUPPORTED_VERSION, Kafka's
answer to a type it does not list. Needs DESCRIBE_CONFIGS on the cluster, as in Kafka."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers.describe_configs import ResourceType
from vdl_broker.server.handlers.metadata import listener_brokers
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ListConfigResourcesRequest, ListConfigResourcesResponse
from vdl_wire.messages.list_config_resources import CLIENT_METRICS

API_KEY = ListConfigResourcesRequest.DECL.api_key
NAME = "ListConfigResources"

Resource = ListConfigResourcesResponse.ConfigResource

SERVED_TYPES = (ResourceType.TOPIC, ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.GROUP,
                CLIENT_METRICS)


def handle(node: NodeView, context: RequestContext,
           request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    if not authorized_cluster(node, context, Operation.DESCRIBE_CONFIGS):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if context.api_version == 0:
        wanted: list[int] = [CLIENT_METRICS]
    else:
        wanted = list(request.resource_types) or [int(t) for t in SERVED_TYPES]
    if any(t not in SERVED_TYPES for t in wanted):
        return error_response(request, context.api_version, ErrorCode.UNSUPPORTED_VERSION)
    resources: list[Resource] = []
    for per_node in (ResourceType.BROKER_LOGGER, ResourceType.BROKER):  # in Kafka's order
        if per_node in wanted:
            resources += [Resource(resource_name=str(b.node_id), resource_type=int(per_node))
                          for b in listener_brokers(node, context.protocol)]
    if ResourceType.TOPIC in wanted:
        resources += [Resource(resource_name=name, resource_type=int(ResourceType.TOPIC))
                      for name in sorted(node.metadata.state.streams)]
    if ResourceType.GROUP in wanted:
        resources += [Resource(resource_name=name, resource_type=int(ResourceType.GROUP))
                      for name in sorted(node.metadata.state.groups.configs)]
    return ListConfigResourcesResponse(config_resources=resources)


def error_response(request: ListConfigResourcesRequest, version: int, code: ErrorCode) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(error_code=int(code), config_resources=[])
