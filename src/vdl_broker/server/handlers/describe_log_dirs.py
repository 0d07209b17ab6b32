"""DescribeLogDirs (key 35): this node's one log directory (`data_dir`), the size of each local
replica in it, and (v4, KIP-827) the total and usable bytes of the disk it is on, which
`vdl cluster status` shows per node. Null topics ask for every local replica; a named stream with
no replica here is left out, as Kafka leaves out partitions a broker does not host."""

from __future__ import annotations

import shutil
from pathlib import Path

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeLogDirsRequest, DescribeLogDirsResponse

API_KEY = DescribeLogDirsRequest.DECL.api_key
NAME = "DescribeLogDirs"

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionInfo = DescribeLogDirsResponse.DescribeLogDirsPartition


def handle(node: NodeView, context: RequestContext,
           request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authorized_cluster(node, context, Operation.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        return DescribeLogDirsResponse(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), results=[
            Result(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), log_dir="")])  # v0-2: no top-level code
    data_dir = Path(node.config.data_dir).resolve()
    if request.topics is None:
        wanted = {partition.name: [0] for partition in node.replicas.all()}
    else:
        wanted = {topic.topic: list(topic.partitions) for topic in request.topics}
    topics = []
    for name, indexes in sorted(wanted.items()):
        partition = node.replicas.local(name)
        if partition is None or partition.closed or 0 not in indexes:
            continue
        lag = max(0, partition.high_watermark - partition.log_end_offset)
        topics.append(Topic(name=name, partitions=[PartitionInfo(
            partition_index=0, partition_size=partition.log.size_bytes, offset_lag=lag, is_future_key=False)]))
    try:
        usage = shutil.disk_usage(data_dir)
        total, usable, code = usage.total, usage.free, ErrorCode.NONE
    except OSError:
        total, usable, code = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
    result = Result(error_code=int(code), log_dir=str(data_dir), topics=topics, total_bytes=total,
                    usable_bytes=usable)
    return DescribeLogDirsResponse(error_code=0, results=[result])


def error_response(request: DescribeLogDirsRequest, version: int, code: ErrorCode) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(error_code=int(code), results=[])
