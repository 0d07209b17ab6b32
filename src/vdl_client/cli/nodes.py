"""`vdl nodes list|decommission|remove`: the cluster's nodes (vdl_client/cluster_admin.py)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from vdl_client.cli.common import CliError, Parser, open_client
from vdl_client.client import VdlClient
from vdl_client.cluster_admin import decommission_node, list_nodes, remove_node

WAIT_POLL_S = 1.0


def cmd_list(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        nodes = list_nodes(client)
    header = ("id", "client", "raft", "rack", "state", "metadata", "reachable", "leads", "replicas")
    rows = [(str(n.node_id), n.client, n.raft, n.rack or "-", n.state, n.metadata_role,
             "yes" if n.reachable else "no", str(n.leads), str(n.replicas)) for n in nodes]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _wait_gone(client: VdlClient, node_id: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        nodes = {n.node_id: n for n in list_nodes(client)}
        node = nodes.get(node_id)
        if node is None:
            return
        if time.monotonic() > deadline:
            raise CliError(f"node {node_id} still {node.state} with {node.replicas} replica(s) after {timeout_s:.0f} s")
        time.sleep(WAIT_POLL_S)


def _take_out(args: argparse.Namespace, action: Callable[[VdlClient, int], None], what: str) -> int:
    with open_client(args) as client:
        action(client, args.id)
        print(f"node {args.id}: {what}")
        if args.wait:
            _wait_gone(client, args.id, args.timeout)
            print(f"node {args.id}: removed")
    return 0


def cmd_decommission(args: argparse.Namespace) -> int:
    return _take_out(args, decommission_node, "decommissioning (its replicas move to other nodes, then it is removed)")


def cmd_remove(args: argparse.Namespace) -> int:
    return _take_out(args, remove_node, "removing (out of the metadata group, its replicas recreated elsewhere)")


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    nodes = commands.add_parser("nodes", help="list the cluster's nodes; decommission or remove one")
    actions = nodes.add_subparsers(dest="action", required=True, parser_class=Parser)
    listing = actions.add_parser("list", parents=[connection],
                                 help="id, addresses, rack, state, metadata-group role, streams led / replicated")
    listing.set_defaults(run=cmd_list)
    for name, run, text in (("decommission", cmd_decommission, "move every replica off the node, then remove it"),
                            ("remove", cmd_remove, "a node gone for good: drop it and recreate its replicas")):
        sub = actions.add_parser(name, parents=[connection], help=text)
        sub.add_argument("id", type=int, help="the node id")
        sub.add_argument("--wait", action="store_true", help="return once the node is gone from the cluster")
        sub.add_argument("--timeout", type=float, default=600.0, help="seconds --wait waits (default 600)")
        sub.set_defaults(run=run)
