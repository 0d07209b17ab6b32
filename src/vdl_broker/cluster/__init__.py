"""Cluster metadata (cluster id, nodes, streams, replica sets) replicated by the "__metadata"
Raft group."""

from vdl_broker.cluster.metadata import (
    METADATA_GROUP,
    ApplyResult,
    ClusterState,
    NodeInfo,
    Outcome,
    StreamInfo,
    create_stream_command,
    decode_command,
    delete_stream_command,
    encode_command,
    register_node_command,
)

__all__ = [
    "METADATA_GROUP",
    "ApplyResult",
    "ClusterState",
    "NodeInfo",
    "Outcome",
    "StreamInfo",
    "create_stream_command",
    "decode_command",
    "delete_stream_command",
    "encode_command",
    "register_node_command",
]
