"""`vdl cluster status`: one screen that says whether the cluster is healthy -- every node up
(with the streams it leads and its free disk), no under-replicated and no unavailable stream, a
metadata leader -- and exits non-zero when it is not (vdl_client/health.py gathers it)."""

from __future__ import annotations

import argparse

from vdl_client.cli.common import Parser, UsageError, columns, open_client
from vdl_client.cluster_admin import upgrade_features
from vdl_client.health import ClusterHealth, NodeHealth, cluster_health

LISTED = 10  # stream names shown per line before "... and N more"
GIB = 1 << 30


def _disk(node: NodeHealth) -> str:
    fraction = node.disk_free_fraction
    if fraction is None:
        return "-"
    return f"{node.disk_free / GIB:.1f} GiB of {node.disk_total / GIB:.1f} GiB ({fraction:.0%})"


def _names(streams: tuple[str, ...]) -> str:
    if not streams:
        return "0"
    shown = ", ".join(streams[:LISTED])
    more = f", ... and {len(streams) - LISTED} more" if len(streams) > LISTED else ""
    return f"{len(streams)} ({shown}{more})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def render(health: ClusterHealth, min_disk_free: float) -> tuple[str, bool]:
    """The screen, and whether the cluster is healthy."""
    up = sum(1 for n in health.nodes if n.up)
    leader = f"node {health.metadata_leader}" if health.metadata_leader >= 0 else "none"
    lines = [f"cluster {health.cluster_id or '-'}: {_count(len(health.nodes), 'node')} ({up} up), "
             f"{_count(len(health.streams), 'stream')}, metadata leader {leader}"]
    rows = [[str(n.node_id), n.address, "up" if n.up else "down", str(len(n.leads)) if n.up else "-", _disk(n)]
            for n in health.nodes]
    text = "\n".join(lines) + "\n" + columns(["NODE", "ADDRESS", "STATE", "LEADS", "DISK FREE"], rows)
    text += f"under-replicated streams: {_names(health.under_replicated)}\n"
    text += f"unavailable streams: {_names(health.unavailable)}\n"
    problems = health.problems(min_disk_free)
    text += ("unhealthy: " + "; ".join(problems) if problems else "healthy") + "\n"
    return text, not problems


def cmd_status(args: argparse.Namespace) -> int:
    if not 0 <= args.min_disk_free <= 100:
        raise UsageError(f"--min-disk-free must be a percentage from 0 to 100, got {args.min_disk_free}")
    with open_client(args) as client:
        health = cluster_health(client)
    text, healthy = render(health, args.min_disk_free / 100)
    print(text, end="")
    return 0 if healthy else 1


def cmd_upgrade(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        before, after = upgrade_features(client, args.level, validate_only=args.dry_run)
    if before == after:
        print(f"vdl.metadata.version is at level {after} already")
    elif args.dry_run:
        print(f"vdl.metadata.version is at level {before}; level {after} may be finalized")
    else:
        print(f"vdl.metadata.version raised from level {before} to {after}")
    return 0


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    cluster = commands.add_parser("cluster", help="the cluster's health and feature level")
    actions = cluster.add_subparsers(dest="action", required=True, parser_class=Parser)
    status = actions.add_parser("status", parents=[connection],
                                help="nodes up/down, leaders per node, under-replicated and unavailable streams, "
                                     "disk free; exit code 1 when unhealthy")
    status.add_argument("--min-disk-free", type=float, default=10.0, metavar="PERCENT",
                        help="a node with less free disk than this is unhealthy (default 10)")
    status.set_defaults(run=cmd_status)
    upgrade = actions.add_parser("upgrade", parents=[connection],
                                 help="after every node runs the new release: let the cluster use what it "
                                      "adds (raise vdl.metadata.version); refused while a node is down or older")
    upgrade.add_argument("--level", type=int, help="the level to finalize (default: the newest every node supports)")
    upgrade.add_argument("--dry-run", action="store_true", help="check only, change nothing")
    upgrade.set_defaults(run=cmd_upgrade)
