"""`vdl streams create|list|describe|delete|alter-config`; `reassign|reassignments|elect-preferred`
(replica moves and preferred leaders: the functions at the end of this module)."""

from __future__ import annotations

import argparse
import time

from vdl_client.cli.common import (
    CliError,
    Parser,
    UsageError,
    alter_config_parser,
    config_pairs,
    format_configs,
    key_values,
    open_client,
)
from vdl_client.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from vdl_client.cluster_admin import elect_preferred, list_reassignments, reassign_stream
from vdl_client.configs import alter_stream_configs, describe_stream_configs


def cmd_streams(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        if args.action == "create":
            client.create_stream(args.name, args.replication_factor, key_values(config_pairs(args), "--config"),
                                 exist_ok=False)
            print(f"created stream {args.name}")
        elif args.action == "delete":
            client.delete_streams([args.name], missing_ok=False)
            print(f"deleted stream {args.name}")
        elif args.action == "list":
            for name in client.list_streams():
                print(name)
        else:
            leader = client.leader_of(args.name)
            start = client.list_offset(args.name, EARLIEST_TIMESTAMP)
            end = client.list_offset(args.name, LATEST_TIMESTAMP)
            print(f"stream {args.name}: partition 0, leader node {leader}, "
                  f"offsets {start}..{end} ({end - start} records)")
            print(format_configs(describe_stream_configs(client, args.name)), end="")
    return 0


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    streams = commands.add_parser("streams", help="create, list, describe or delete streams; alter their configs")
    actions = streams.add_subparsers(dest="action", required=True, parser_class=Parser)
    helps = {"create": "create a stream", "describe": "a stream's leader, offsets and configs",
             "delete": "delete a stream and its records"}
    for action, help_text in helps.items():
        sub = actions.add_parser(action, parents=[connection], help=help_text)
        sub.add_argument("name")
        if action == "create":
            sub.add_argument("--replication-factor", type=int, default=-1,
                             help="1, 3 or 5 (default: 3, or every node of a smaller cluster)")
            # --config (common.py) takes a stream config, e.g. retention.ms=86400000, here too.
            sub.set_defaults(config_pairs=True)
    actions.add_parser("list", parents=[connection], help="the streams' names")
    streams.set_defaults(run=cmd_streams)
    alter_config_parser(actions, connection, "stream", "stream configs", "the node's default", alter_stream_configs)
    register_replica_commands(actions, connection)


# -- replica moves and preferred leaders ------------------------------------------------------------


def node_ids(value: str) -> list[int]:
    try:
        ids = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected node ids like 2,3,4, got {value!r}") from None
    if not ids or any(i <= 0 for i in ids):
        raise argparse.ArgumentTypeError(f"expected positive node ids like 2,3,4, got {value!r}")
    return ids


def cmd_reassign(args: argparse.Namespace) -> int:
    if (args.replicas is None) == (not args.cancel):
        raise UsageError("reassign needs --replicas N,N,... or --cancel")
    with open_client(args) as client:
        reassign_stream(client, args.name, args.replicas)
        if args.cancel:
            print(f"stream {args.name}: reassignment cancelled (going back to its replicas)")
        else:
            print(f"stream {args.name}: moving to replicas {','.join(map(str, args.replicas))}")
        if args.wait:
            deadline = time.monotonic() + args.timeout
            while list_reassignments(client, [args.name]):
                if time.monotonic() > deadline:
                    raise CliError(f"stream {args.name} still moving after {args.timeout:.0f} s")
                time.sleep(0.5)
            print(f"stream {args.name}: done")
    return 0


def cmd_reassignments(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        moves = list_reassignments(client, [args.name] if args.name else None)
    for move in moves:
        print(f"{move.stream}: replicas {list(move.replicas)}, adding {list(move.adding)}, "
              f"removing {list(move.removing)}")
    return 0


def cmd_elect_preferred(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        outcomes = elect_preferred(client, [args.name] if args.name else None)
    failed = 0
    for stream, (outcome, message) in sorted(outcomes.items()):
        if outcome in ("elected", "already"):
            print(f"{stream}: {'preferred leader elected' if outcome == 'elected' else 'already led by its preferred leader'}")
        else:
            failed += 1
            print(f"{stream}: {outcome}{f' ({message})' if message else ''}")
    return 1 if failed else 0


def register_replica_commands(actions: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    reassign = actions.add_parser("reassign", parents=[connection],
                                  help="move a stream's replicas (learners catch up, then the set changes)")
    reassign.add_argument("name")
    reassign.add_argument("--replicas", type=node_ids, help="the new replica set, preferred leader first: 2,3,4")
    reassign.add_argument("--cancel", action="store_true", help="cancel the stream's reassignment in progress")
    reassign.add_argument("--wait", action="store_true", help="return once the move is done")
    reassign.add_argument("--timeout", type=float, default=600.0, help="seconds --wait waits (default 600)")
    reassign.set_defaults(run=cmd_reassign)
    moves = actions.add_parser("reassignments", parents=[connection], help="list the reassignments in progress")
    moves.add_argument("name", nargs="?")
    moves.set_defaults(run=cmd_reassignments)
    elect = actions.add_parser("elect-preferred", parents=[connection],
                               help="hand every stream (or one) to its preferred leader now")
    elect.add_argument("name", nargs="?")
    elect.set_defaults(run=cmd_elect_preferred)
