"""`vdl groups list|describe|reset-offsets`: consumer groups and their lag, as Kafka's
kafka-consumer-groups shows them (a Spark query with commitOffsetsToGroup is a group too);
`vdl groups configs|alter-config`: a group's own configs, as kafka-configs --entity-type groups.

Lag is a stream's high watermark minus the group's committed offset. reset-offsets stores new
offsets with a standalone commit and is refused while the group has members: their own commits
would overwrite the reset (the broker refuses such a commit too).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from vdl_client.cli.common import (
    CliError,
    Parser,
    UsageError,
    alter_config_parser,
    columns,
    format_configs,
    open_client,
)
from vdl_client.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, VdlClient
from vdl_client.configs import alter_group_configs, describe_group_configs
from vdl_client.groups import GroupDescription, commit_offsets, committed_offsets, describe_group, list_groups
from vdl_client.settings import StreamNotFoundError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RESET_TO = "earliest, latest, an offset or an ISO-8601 time (2026-01-31T12:00:00Z; no zone = UTC)"


def cmd_list(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        groups = list_groups(client)
    # As Kafka's tools: TYPE is the group's (Classic or Consumer), PROTOCOL its members' protocol type.
    print(columns(["GROUP", "STATE", "TYPE", "PROTOCOL"],
                  [[g.group_id, g.state, g.group_type, g.protocol_type or "-"] for g in groups]), end="")
    return 0


def _high_watermarks(client: VdlClient, streams: list[str]) -> dict[str, int | None]:
    result: dict[str, int | None] = {}
    for stream in streams:
        try:
            result[stream] = client.list_offset(stream, LATEST_TIMESTAMP)
        except StreamNotFoundError:  # assigned, but deleted since
            result[stream] = None
    return result


def _describe(client: VdlClient, group_id: str) -> tuple[GroupDescription, dict[str, int]]:
    group = describe_group(client, group_id)
    committed = committed_offsets(client, group_id)
    if group.state == "Dead" and not committed:
        raise CliError(f"group {group_id!r} does not exist")
    return group, committed


def cmd_describe(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        group, committed = _describe(client, args.group)
        streams = sorted(set(committed) | {s for m in group.members for s in m.streams})
        ends = _high_watermarks(client, streams)
    protocol = f" ({group.protocol_type}, {group.protocol})" if group.protocol else ""
    print(f"group {group.group_id}: {group.state}, {len(group.members)} member(s){protocol}")
    rows = []
    for stream in streams:
        offset, end = committed.get(stream), ends[stream]
        lag = "-" if offset is None or end is None else str(max(0, end - offset))
        owner = group.owner_of(stream)
        rows.append([stream, "-" if offset is None else str(offset), "-" if end is None else str(end), lag,
                     owner.member_id if owner else "-"])
    print(columns(["STREAM", "COMMITTED", "HIGH-WATERMARK", "LAG", "OWNER"], rows), end="")
    return 0


def reset_target(spec: str) -> tuple[str, int]:
    """--to as ("earliest" | "latest" | "offset" | "timestamp", value)."""
    if spec in ("earliest", "latest"):
        return spec, 0
    if spec.isdigit():
        return "offset", int(spec)
    try:
        when = datetime.fromisoformat(spec)
    except ValueError:
        raise UsageError(f"--to must be {RESET_TO}, got {spec!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return "timestamp", (when - EPOCH) // timedelta(milliseconds=1)  # exact: no float rounding


def cmd_reset(args: argparse.Namespace) -> int:
    kind, value = reset_target(args.to)
    with open_client(args) as client:
        group, committed = describe_group(client, args.group), committed_offsets(client, args.group)
        if group.has_members:
            raise CliError(f"group {args.group!r} has {len(group.members)} member(s) ({group.state}): stop its "
                           "consumers before resetting its offsets")
        streams = sorted(set(args.stream or committed))
        if not streams:
            raise CliError(f"group {args.group!r} has no committed offsets: name the streams with --stream")
        earliest = client.list_offsets(streams, EARLIEST_TIMESTAMP)
        latest = client.list_offsets(streams, LATEST_TIMESTAMP)
        if kind == "timestamp":
            found = client.list_offsets(streams, None, timestamps=dict.fromkeys(streams, value))
            # No record at or after that time: the end of the stream (as Kafka's tool does).
            targets = {s: found[s] if found[s] >= 0 else latest[s] for s in streams}
        elif kind == "offset":
            targets = {s: min(max(value, earliest[s]), latest[s]) for s in streams}  # kept inside the stream
        else:
            targets = earliest if kind == "earliest" else latest
        commit_offsets(client, args.group, {s: targets[s] for s in streams})
    print(f"group {args.group}: offsets reset to {args.to}")
    print(columns(["STREAM", "PREVIOUS", "NEW"], [[s, str(committed[s]) if s in committed else "-", str(targets[s])]
                                                   for s in streams]), end="")
    return 0


def cmd_configs(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        print(format_configs(describe_group_configs(client, args.group)), end="")
    return 0


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    groups = commands.add_parser("groups", help="consumer groups: list, describe (offsets and lag), reset offsets, "
                                                "configs")
    actions = groups.add_subparsers(dest="action", required=True, parser_class=Parser)
    actions.add_parser("list", parents=[connection], help="every group, its state and type").set_defaults(run=cmd_list)
    describe = actions.add_parser("describe", parents=[connection],
                                  help="per stream: committed offset, high watermark, lag, owner member")
    describe.add_argument("group")
    describe.set_defaults(run=cmd_describe)
    reset = actions.add_parser("reset-offsets", parents=[connection],
                               help="store new offsets for a group without members")
    reset.add_argument("group")
    reset.add_argument("--to", required=True, metavar="earliest|latest|OFFSET|TIMESTAMP", help=RESET_TO)
    reset.add_argument("--stream", action="append", metavar="NAME",
                       help="a stream to reset (repeatable; default: every stream the group has an offset for)")
    reset.set_defaults(run=cmd_reset)
    configs = actions.add_parser("configs", parents=[connection],
                                 help="a group's configs: its own, else the nodes' settings")
    configs.add_argument("group")
    configs.set_defaults(run=cmd_configs)
    alter_config_parser(actions, connection, "group", "a group's own configs (KIP-848 session and heartbeat)",
                        "the nodes' setting", alter_group_configs)
