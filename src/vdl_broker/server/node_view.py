"""What a request handler may use of the node it runs on.

Handlers (server/handlers/) and the modules they call with their node (authorizer, forwarding,
internal calls, preferred leaders, follower reads) see the node only through `NodeView`, never
the Broker class: a handler reaching for anything not named here is a type error, so the
node's internals can change without auditing every handler, and a handler can be driven by a
small stand-in in a test. The Broker satisfies it structurally (nothing subclasses it).

Every member is read-only here: a handler asks the node's services, it never replaces one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from vdl_broker.cluster.service import MetadataService
    from vdl_broker.config import NodeConfig
    from vdl_broker.groups.service import GroupService
    from vdl_broker.metrics import BrokerMetrics
    from vdl_broker.raft.host import RaftHost
    from vdl_broker.server.authorizer import Authorizer
    from vdl_broker.server.producer_state import ProducerIdAllocator
    from vdl_broker.server.replica_manager import ReplicaManager
    from vdl_broker.tables.service import TableService
    from vdl_broker.transactions.coordinator import TransactionCoordinator


class NodeView(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def cluster_id(self) -> str | None:
        """The metadata's cluster id (None until the metadata names one)."""

    @property
    def metadata(self) -> MetadataService:
        """The metadata group: streams, nodes, users, ACLs, group offsets; submits commands."""

    @property
    def replicas(self) -> ReplicaManager:
        """Every stream as a Partition (replicated here) or a RemotePartition (led elsewhere)."""

    @property
    def groups(self) -> GroupService: ...

    @property
    def authorizer(self) -> Authorizer: ...

    @property
    def transactions(self) -> TransactionCoordinator:
        """The transaction coordinator (active while this node leads the metadata group)."""

    @property
    def producer_ids(self) -> ProducerIdAllocator: ...

    @property
    def tables(self) -> TableService:
        """The Delta tables streams are tiered into (DescribeConfigs reports their status)."""

    @property
    def metrics(self) -> BrokerMetrics | None:
        """None when metrics are off (no metrics_listen): nothing is counted then."""

    @property
    def host(self) -> RaftHost:
        """The Raft host, whose transport carries requests to other nodes (server/internal.py)."""

    @property
    def cut_off(self) -> bool:
        """This node hears no majority of the cluster: clients are sent elsewhere (server/cut_off.py)."""

    def own_address(self, protocol: str) -> str:
        """This node's advertised host:port for clients of listener `protocol`."""

    def node_client_address(self, node_id: int, protocol: str) -> str | None:
        """Where clients of listener `protocol` reach node `node_id`, if known."""

    def recompress_executor(self) -> Executor:
        """The worker threads that recompress produced batches (compression.type), off the event loop."""
