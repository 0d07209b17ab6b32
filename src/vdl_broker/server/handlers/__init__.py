"""One handler module per API key. Each module defines:

- `API_KEY`, `NAME`;
- `handle(node, context, request)` -> response, or None for no response (Produce acks=0), typed
  `handle(node: NodeView, context: RequestContext, request: <its request class>)`: `node` is all
  of the node a handler may use (server/node_view.py);
  a coroutine function when the request may wait (delayed produce/fetch, group joins);
- `error_response(request, version, code)` -> the response that answers every part of the
  request with `code` (used when a handler raises: the client gets UNKNOWN_SERVER_ERROR).

A handler's `Order` (server/connection.py: what later requests on its connection wait for) is
READ for the modules in READS, PRODUCE for Produce, WRITE for every other: a new API is a write
until it is listed here as changing nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from vdl_broker.server.connection import Order
from vdl_broker.server.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    update_features,
    vdl_nodes,
    vdl_writer_id,
    write_txn_markers,
)

MODULES: tuple[ModuleType, ...] = (
    produce, fetch, list_offsets, metadata, offset_commit, offset_fetch, find_coordinator, join_group,
    heartbeat, leave_group, sync_group, describe_groups, list_groups, api_versions, create_topics,
    delete_topics, init_producer_id, delete_groups, offset_delete, sasl_handshake, sasl_authenticate,
    describe_acls, create_acls, delete_acls, describe_user_scram_credentials, alter_user_scram_credentials,
    describe_configs, incremental_alter_configs,
    describe_log_dirs, alter_replica_log_dirs, elect_leaders, alter_partition_reassignments,
    list_partition_reassignments, update_features,
    vdl_nodes, alter_configs, create_partitions, describe_cluster, delete_records, offset_for_leader_epoch,
    consumer_group_heartbeat, consumer_group_describe, describe_client_quotas, alter_client_quotas,
    vdl_writer_id, add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit,
    write_txn_markers, describe_producers, describe_transactions, list_transactions, describe_quorum,
    list_config_resources, describe_topic_partitions,
)

# The APIs that change nothing (Metadata's auto-creation runs on its own, as Kafka's: the answer
# says LEADER_NOT_AVAILABLE and the client asks again).
READS: tuple[ModuleType, ...] = (
    fetch, list_offsets, metadata, offset_fetch, find_coordinator, describe_groups, list_groups, api_versions,
    describe_acls, describe_user_scram_credentials, describe_configs, describe_log_dirs,
    list_partition_reassignments, describe_cluster, offset_for_leader_epoch, consumer_group_describe,
    describe_client_quotas, describe_producers, describe_transactions, list_transactions, describe_quorum,
    list_config_resources, describe_topic_partitions,
)


@dataclass(frozen=True, slots=True)
class Handler:
    api_key: int
    name: str
    handle: Callable[..., Any]
    error_response: Callable[[Any, int, Any], Any]
    is_async: bool
    order: Order


def order_of(module: ModuleType) -> Order:
    if module is produce:
        return Order.PRODUCE
    return Order.READ if module in READS else Order.WRITE


def build_handlers() -> dict[int, Handler]:
    return {module.API_KEY: Handler(module.API_KEY, module.NAME, module.handle, module.error_response,
                                    inspect.iscoroutinefunction(module.handle), order_of(module))
            for module in MODULES}
