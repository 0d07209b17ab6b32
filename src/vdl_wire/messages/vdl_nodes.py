"""VdlNodes (key 10000, VDL's own): the cluster's nodes and their membership, version 0,
flexible. Kafka has no API for a node joining, being drained or listed with its state, so VDL
declares one, in a key far from Kafka's range; `vdl nodes` and joining nodes use it.

    action "list"                        every node: addresses, state, metadata-group role; and
                                         how much metadata log the answering node holds (a node
                                         with an empty one asks before it may vote)
    action "join"       node_id, client, raft        a new node asks to join (node.toml join = true)
    action "register"   node_id, client, raft, listeners, rack   a known node describes itself from
                                         its own config (at every start, as Kafka brokers register)
    action "decommission" node_id        move its replicas off, then remove it
    action "remove"     node_id          a node gone for good: out of the metadata group, replicas moved
    action "reassignment_done" stream, created_index, replicas   a stream leader reports its move done
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, message, struct

VDL_NODES_API_KEY = 10000

VDL_NODES_REQUEST = message(
    "VdlNodesRequest",
    VDL_NODES_API_KEY,
    "0",
    "0+",
    Field("action", STRING),
    Field("node_id", INT32, default=-1),
    Field("client", STRING, nullable_versions="0+", default=None),
    Field("raft", STRING, nullable_versions="0+", default=None),
    Field("listeners", Array(STRING)),  # a joining node's PROTOCOL://host:port, when it has several
    Field("rack", STRING, nullable_versions="0+", default=None),  # a joining node's rack
    Field("stream", STRING, nullable_versions="0+", default=None),
    Field("created_index", INT64, default=0),
    Field("replicas", Array(INT32)),
    Field("timeout_ms", INT32, default=30000),
)

VDL_NODES_RESPONSE = message(
    "VdlNodesResponse",
    VDL_NODES_API_KEY,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "nodes",
        Array(
            struct(
                "VdlNode",
                Field("node_id", INT32),
                Field("client", STRING),
                Field("raft", STRING),
                Field("rack", STRING, nullable_versions="0+", default=None),
                Field("state", STRING),
                Field("metadata_role", STRING),  # voter | learner | none (of the metadata group)
                Field("reachable", BOOL),  # the metadata leader heard from it recently
            )
        ),
    ),
    Field("removed_nodes", Array(INT32)),  # ids removed for good (they never come back)
    # The answering node's metadata log: its last Raft index (0: empty; -1: not told, an older
    # node). A tagged field: older nodes skip it.
    Field("metadata_last_index", INT64, tagged_versions="0+", tag=0, default=-1),
)

VdlNodesRequest = build_message(VDL_NODES_REQUEST, __name__)
VdlNodesResponse = build_message(VDL_NODES_RESPONSE, __name__)
