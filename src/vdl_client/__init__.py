"""The one Kafka-protocol client of the project (built on vdl_wire only) and the `vdl` CLI.

connection.py  Connection (framing, correlation ids, versions from the protocol declarations),
               connect_first / request_once over a `host:port,host:port` bootstrap list
client.py      VdlClient: leader discovery through Metadata, retries until a deadline, and one
               helper per API the project uses (admin, offsets, fetch, produce); send/call
               for the others, along a route
routes.py      where a request goes: ANY_NODE, CONTROLLER, LeaderOf, CoordinatorOf, Node
pipeline.py    ProducePipeline: several Produce requests in flight to one stream's leader
requests.py    the Fetch and Produce requests for one stream
settings.py    ClientSettings and the errors the client reports
configs.py     stream configs: DescribeConfigs and IncrementalAlterConfigs
replicas.py    follower reads: a stream's in-sync replicas and racks, Fetch v11 at one replica
groups.py      consumer groups at their coordinator: list, describe, committed offsets, standalone commits
health.py      the cluster's health as `vdl cluster status` shows it (every node asked itself)
cli/           the `vdl` command line, one module per command group
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vdl_client.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchResult, VdlClient
    from vdl_client.connection import (
        BootstrapError,
        Connection,
        connect_first,
        parse_bootstrap,
        request_once,
    )
    from vdl_client.pipeline import ProducePipeline
    from vdl_client.routes import ANY_NODE, CONTROLLER, CoordinatorOf, LeaderOf, Node, Route
    from vdl_client.settings import (
        BrokerUnreachableError,
        ClientSettings,
        RetriableError,
        StreamExistsError,
        StreamNotFoundError,
        VdlClientError,
    )
    from vdl_wire.api import default_version

# Where each name lives, imported on first use (PEP 562): the client's modules load every protocol
# message class (vdl_wire.api), which a process that only parses settings or bootstrap lists -- a
# Spark Python worker that looks up or plans format("vdl") -- need not pay for.
_LAZY = {
    **dict.fromkeys(("EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "FetchResult", "VdlClient"), "vdl_client.client"),
    **dict.fromkeys(("Connection", "connect_first", "request_once"), "vdl_client.connection"),
    **dict.fromkeys(("BootstrapError", "parse_bootstrap"), "vdl_client.bootstrap"),
    "ProducePipeline": "vdl_client.pipeline",
    **dict.fromkeys(("ANY_NODE", "CONTROLLER", "CoordinatorOf", "LeaderOf", "Node", "Route"), "vdl_client.routes"),
    **dict.fromkeys(("BrokerUnreachableError", "ClientSettings", "RetriableError", "StreamExistsError",
                     "StreamNotFoundError", "VdlClientError"), "vdl_client.settings"),
    "default_version": "vdl_wire.api",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vdl_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ANY_NODE",
    "CONTROLLER",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "BootstrapError",
    "BrokerUnreachableError",
    "ClientSettings",
    "Connection",
    "CoordinatorOf",
    "FetchResult",
    "LeaderOf",
    "Node",
    "ProducePipeline",
    "RetriableError",
    "Route",
    "StreamExistsError",
    "StreamNotFoundError",
    "VdlClient",
    "VdlClientError",
    "connect_first",
    "default_version",
    "parse_bootstrap",
    "request_once",
]
