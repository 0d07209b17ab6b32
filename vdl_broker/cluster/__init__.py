"""Cluster metadata (nodes, streams, replica sets) replicated by the "__metadata" Raft group,
and node.toml (this node's identity and peers)."""

from vdl_broker.cluster.config import NodeAddress, NodeConfig, NodeConfigError, load_node_config
from vdl_broker.cluster.metadata import (
    METADATA_GROUP,
    ApplyResult,
    ClusterState,
    NodeInfo,
    Outcome,
    StreamInfo,
    create_stream_command,
    decode_commands,
    delete_stream_command,
    encode_command,
    register_node_command,
)

__all__ = [
    "METADATA_GROUP",
    "ApplyResult",
    "ClusterState",
    "NodeAddress",
    "NodeConfig",
    "NodeConfigError",
    "NodeInfo",
    "Outcome",
    "StreamInfo",
    "create_stream_command",
    "decode_commands",
    "delete_stream_command",
    "encode_command",
    "load_node_config",
    "register_node_command",
]
