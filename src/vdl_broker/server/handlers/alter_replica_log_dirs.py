"""AlterReplicaLogDirs (key 34): move replicas between a node's log directories. A VDL node has one,
its `data_dir` (DescribeLogDirs names it), so the only move there is is to where a replica already
is: as Kafka answers that no-op, NONE for a replica on this node; REPLICA_NOT_AVAILABLE for one it
does not hold (an unknown stream, a partition other than 0), as Kafka's broker answers a partition
it does not host; LOG_DIR_NOT_FOUND for any other directory. Needs ALTER on the cluster, as in Kafka
(kafka-reassign-partitions sends it for the "log_dirs" of a plan, kafka-python's
alter_replica_log_dirs)."""

from __future__ import annotations

from pathlib import Path

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse

API_KEY = AlterReplicaLogDirsRequest.DECL.api_key
NAME = "AlterReplicaLogDirs"

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


def _is_data_dir(node: NodeView, path: str) -> bool:
    return Path(path).is_absolute() and Path(path).resolve() == Path(node.config.data_dir).resolve()


def handle(node: NodeView, context: RequestContext,
           request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    if not authorized_cluster(node, context, Operation.ALTER):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = []
    for directory in request.dirs:
        here = _is_data_dir(node, directory.path)
        for topic in directory.topics:
            partitions = []
            for index in topic.partitions:
                local = node.replicas.local(topic.name)
                if not here:
                    code = ErrorCode.LOG_DIR_NOT_FOUND
                elif local is None or local.closed or index != 0:
                    code = ErrorCode.REPLICA_NOT_AVAILABLE
                else:
                    code = ErrorCode.NONE
                partitions.append(PartitionResult(partition_index=index, error_code=int(code)))
            results.append(TopicResult(topic_name=topic.name, partitions=partitions))
    return AlterReplicaLogDirsResponse(results=results)


def error_response(request: AlterReplicaLogDirsRequest, version: int,
                   code: ErrorCode) -> AlterReplicaLogDirsResponse:
    return AlterReplicaLogDirsResponse(results=[
        TopicResult(topic_name=t.name, partitions=[PartitionResult(partition_index=i, error_code=int(code))
                                                   for i in t.partitions])
        for d in request.dirs for t in d.topics])
