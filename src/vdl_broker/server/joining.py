"""Finding the cluster at start: a new node joins it, a restarted one learns every node's address,
and a node whose metadata log is empty finds out whether the cluster exists before its metadata
replica may vote (vdl_broker.cluster.identity, rule 1: it may have lost its data directory).

A new node (node.toml `join = true`, `peers` naming members) starts its metadata group knowing
no configuration (raft/membership.py: it never campaigns) and asks the members it knows, over
their client port, to let it in (VdlNodes "join", forwarded to the metadata leader). The leader
records it as joining; every node adds its Raft address; the membership controller makes it a
learner of the metadata group, then a voter once it has caught up, then active
(cluster/controller.py). It asks again (about every second) until its own copy of the metadata
shows it registered: a request or an answer lost on the way only delays it. A removed node id
is refused for good. The request goes to a client listener (the members' Raft transports do not
know the new node yet): with `authorizer = acl` the principal it connects as needs ALTER on the
cluster.

Every clustered node also needs the Raft address of every other node, and nodes that joined
after it started are in no node.toml: a node learns them from the metadata log, but only once
a metadata leader has reached it -- which may be one of those nodes (the transport's lower id
dials: a node must know a higher-id peer's address to reach it). So at start it asks a member
named in its node.toml for the node list (VdlNodes "list", over the node-to-node channel:
server/internal.py) and adds every address it gets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vdl_broker.cluster.identity import Formation, formation
from vdl_broker.cluster.service import own_registration_differs
from vdl_broker.raft.types import RaftError
from vdl_broker.server import internal, peer_request
from vdl_broker.server.handlers import vdl_nodes
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import VdlNodesRequest

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)

RETRY_S = 1.0
PROBE_RETRY_S = 0.25  # a node with an empty metadata log asks its peers again this often
# ... and says whom it is waiting for once it waited this long (an operator who started one node
# learns why it does not serve yet), then again this often.
WAITING_FIRST_LOG_S = 2.0
WAITING_LOG_S = 10.0


async def _ask(broker: Broker, request: VdlNodesRequest) -> Any:
    """The first answer without error from a peer named in node.toml (its nodes tracked)."""
    for peer in broker.config.peers:
        if peer.id == broker.node_id:
            continue
        try:
            if request.action == "join":
                response = await peer_request.request(peer.client, request, 5.0)
            else:
                response = await internal.call(broker, peer.id, request, 0, 5.0)
        except (OSError, ValueError, TimeoutError) as error:
            log.debug("node %d: %s through node %d failed: %s", broker.node_id, request.action, peer.id, error)
            continue
        if response.error_code == 0:
            for node in response.nodes:
                broker.track_peer(node.node_id, node.raft)
            return response
        if response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED:
            return response
        log.info("node %d: %s through node %d: %s", broker.node_id, request.action, peer.id,
                 response.error_message or ErrorCode(response.error_code).name)
    return None


async def _pause(broker: Broker, done: Callable[[], bool]) -> None:
    group = broker.metadata.group
    if group is None or group.stopped:
        # A stopped group's wait_for returns at once: the caller's loop would spin without ever
        # yielding, and never see the cancellation of a node stopping.
        await asyncio.sleep(RETRY_S)
    else:  # the metadata log reaching us ends it early
        await group.wait_for(lambda _: done(), RETRY_S)


async def join_cluster(broker: Broker) -> None:
    me = broker.node_id
    config = broker.config
    own = config.own_address
    request = VdlNodesRequest(action="join", node_id=me, client=own.client, raft=own.raft,
                              listeners=list(own.listeners), rack=own.rack)
    state = broker.metadata.state
    asked = False
    while me not in state.nodes:
        response = await _ask(broker, request)
        if response is not None and response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED:
            log.error("node %d cannot join: %s", me, response.error_message)
            return
        if response is not None and not asked:
            asked = True
            log.info("node %d: asked to join the cluster", me)
        await _pause(broker, lambda: me in state.nodes)
    log.info("node %d: registered in the cluster metadata", me)


async def discover_peers(broker: Broker) -> None:
    """Learn every node's Raft address from a member (until one answers). A node removed while
    it was down (`vdl nodes remove`) learns it here: it was out of the metadata group when its
    removal was decided, so its own metadata never says so."""
    request = VdlNodesRequest(action="list")
    while True:
        response = await _ask(broker, request)
        if response is not None:
            if broker.node_id in response.removed_nodes:
                broker.removed_from_cluster()
            return
        await _pause(broker, lambda: False)


async def formation_at_start(broker: Broker) -> Formation:
    """For a node whose metadata log is empty: FORMING when every node its `peers` name answers
    that it holds no metadata log either, EXISTING as soon as one holds some (identity.py, rule
    1). Waits (asking again every PROBE_RETRY_S) while neither is known. A node started with
    `join = true` joins a cluster that exists by definition (and the members' transports do not
    know it yet: it could not ask them over theirs)."""
    if broker.config.join:
        return Formation.EXISTING
    peers = sorted(peer.id for peer in broker.config.peers if peer.id != broker.node_id)
    held: dict[int, int] = {}
    loop = asyncio.get_running_loop()
    say_at = loop.time() + WAITING_FIRST_LOG_S
    request = VdlNodesRequest(action="list")
    while True:
        for peer in peers:
            if peer in held:
                continue
            try:
                response = await internal.call(broker, peer, request, 0, 2.0)
            except (OSError, ValueError, TimeoutError) as error:
                log.debug("node %d: node %d did not answer: %s", broker.node_id, peer, error)
                continue
            if response.error_code == 0 and response.metadata_last_index >= 0:
                held[peer] = response.metadata_last_index
        verdict = formation(peers, held)
        if verdict is Formation.EXISTING:
            holder = max(held, key=lambda peer: held[peer])
            log.warning("node %d: its metadata log is empty but node %d holds one (through index %d): the "
                        "cluster exists and this node's data directory may be a lost one's replacement; it "
                        "votes in no Raft group until it has the committed log back", broker.node_id, holder,
                        held[holder])
        if verdict is not Formation.WAITING:
            return verdict
        if loop.time() >= say_at:
            say_at = loop.time() + WAITING_LOG_S
            log.warning("node %d: its metadata log is empty; waiting for node(s) %s to say whether the cluster "
                        "exists (a new cluster forms once every node in peers has started)", broker.node_id,
                        ", ".join(str(p) for p in peers if p not in held))
        await asyncio.sleep(PROBE_RETRY_S)


def registered_itself(broker: Broker) -> bool:
    """The metadata applied here describes this node as its own config does (below the feature
    level at which nodes describe themselves: it is registered at all)."""
    state = broker.metadata.state
    known = state.nodes.get(broker.node_id)
    if known is None or not state.nodes_register_themselves:
        return known is not None
    return known.own and not own_registration_differs(known, broker.config.own_address)


async def register_self(broker: Broker) -> None:
    """Describe this node in the cluster metadata from its own config -- addresses, listeners,
    rack -- as Kafka brokers register themselves: no other node's `peers` entry needs to repeat
    them, and a change takes effect at the node's restart. Asked of the metadata leader (through
    whichever node this one reaches) until this node's own copy of the metadata shows it."""
    me = broker.node_id
    own = broker.config.own_address
    state = broker.metadata.state
    request = VdlNodesRequest(action="register", node_id=me, client=own.client, raft=own.raft,
                              listeners=list(own.listeners), rack=own.rack)

    def registered() -> bool:
        # A cluster below the level waits for `vdl cluster upgrade` (the loop asks again then).
        return state.nodes_register_themselves and registered_itself(broker)

    while not registered():
        if me in state.membership.removed:
            return
        if not state.nodes_register_themselves:
            # Woken by the level (a forming cluster's first entries), not only by `registered`:
            # the request below is what registers it.
            await _pause(broker, lambda: state.nodes_register_themselves or registered())
            continue
        try:
            response = await vdl_nodes.run(broker, request)
        except (OSError, ValueError, TimeoutError, RaftError) as error:
            log.debug("node %d: registering itself failed: %s", me, error)
        else:
            if response.error_code != 0:
                log.debug("node %d: registering itself: %s", me,
                          response.error_message or ErrorCode(response.error_code).name)
        await _pause(broker, registered)
    log.info("node %d: registered itself (client %s, raft %s, rack %s)", me, own.client, own.raft, own.rack or "-")


async def find_cluster(broker: Broker) -> None:
    """What a starting node does to reach its cluster (for a cluster of one: describe itself)."""
    if broker.config.join:
        await join_cluster(broker)
    elif any(peer.id != broker.node_id for peer in broker.config.peers):
        await discover_peers(broker)
    await register_self(broker)


async def watch_departure(broker: Broker) -> None:
    """A node on its way out (decommissioning, or `removing` while it runs) asks the metadata
    leader, about every second, whether it was removed yet, and stops once it was. Its own
    metadata replica may never show it: the leader drops it from the metadata group right after
    the removal commits, and the append telling it the new commit index may never come (a
    configuration takes effect on append, raft/confchange.py)."""
    me = broker.node_id
    state = broker.metadata.state
    request = VdlNodesRequest(action="list", node_id=me)
    while me not in state.membership.removed:
        try:
            response = await vdl_nodes.run(broker, request)
        except (OSError, ValueError, TimeoutError, RaftError) as error:
            log.debug("node %d: asking whether it was removed failed: %s", me, error)
        else:
            if response.error_code == 0 and me in response.removed_nodes:
                break
        await _pause(broker, lambda: me in state.membership.removed)
    broker.removed_from_cluster()
