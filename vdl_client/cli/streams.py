"""`vdl streams create|list|describe|delete`."""

from __future__ import annotations

import argparse

from vdl_client.cli.common import Parser, open_client
from vdl_client.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP


def cmd_streams(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        if args.action == "create":
            client.create_stream(args.name, args.replication_factor, exist_ok=False)
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
    return 0


def register(commands: argparse._SubParsersAction, connection: argparse.ArgumentParser) -> None:
    streams = commands.add_parser("streams", help="create, list, describe or delete streams")
    actions = streams.add_subparsers(dest="action", required=True, parser_class=Parser)
    for action in ("create", "describe", "delete"):
        sub = actions.add_parser(action, parents=[connection])
        sub.add_argument("name")
        if action == "create":
            sub.add_argument("--replication-factor", type=int, default=-1,
                             help="1, 3 or 5 (default: 3, or every node of a smaller cluster)")
    actions.add_parser("list", parents=[connection])
    streams.set_defaults(run=cmd_streams)
