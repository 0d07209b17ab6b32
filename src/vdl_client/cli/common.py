"""What every `vdl` command shares: the one-line error, the argument parser and the client."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NoReturn

from vdl_client.client import VdlClient
from vdl_client.configs import DescribedConfig
from vdl_client.connection import BootstrapError, parse_bootstrap
from vdl_client.security import PROPERTIES, SecurityError, SecuritySettings, parse_properties_text
from vdl_client.settings import ClientSettings

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "vdl-cli"
REQUEST_TIMEOUT_MS = 30_000
# Leader elections take about a second; a command waits through a few, not forever.
DEADLINE_MS = 30_000


class CliError(Exception):
    """A failure reported to the user as one line (exit code 1)."""


class UsageError(CliError):
    """A bad command line that only a check after parsing finds (a value out of range, options
    that go together): one line and exit code 2, as argparse's own errors."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's convention)
        print(f"vdl: error: {message}", file=sys.stderr)
        sys.exit(2)


def connection_options() -> Parser:
    """The options of every command that talks to brokers (a parent parser)."""
    parent = Parser(add_help=False)
    # --bootstrap-server: the spelling of Kafka's own tools, which a Kafka user types first
    parent.add_argument("--bootstrap", "--bootstrap-server", default=os.environ.get("VDL_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                        help="brokers HOST:PORT[,HOST:PORT...], tried in order "
                             "(default $VDL_BOOTSTRAP or 127.0.0.1:9092)")
    parent.add_argument("-X", dest="properties", action="append", default=[], metavar="KEY=VALUE",
                        help="a client property, librdkafka's names: security.protocol, sasl.mechanism, "
                             "sasl.username, sasl.password, ssl.ca.location, ... (repeatable; wins over --config)")
    parent.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="a properties file (key=value lines) of client properties; `streams create` "
                             "also takes stream configs here as KEY=VALUE")
    return parent


def _is_pair(item: str) -> bool:
    return "=" in item and not Path(item).is_file()


def config_pairs(args: argparse.Namespace) -> list[str]:
    """The KEY=VALUE items of --config (stream configs of `streams create`)."""
    return [item for item in args.config if _is_pair(item)]


def client_properties(args: argparse.Namespace) -> dict[str, str]:
    """--config FILE, then each -X on top; only the properties the client knows."""
    properties: dict[str, str] = {}
    for item in args.config:
        if _is_pair(item):
            if not getattr(args, "config_pairs", False):
                raise UsageError(f"--config takes a client properties FILE, got {item.split('=')[0]}=...")
            continue
        try:
            text = Path(item).read_text()
        except OSError as error:
            raise CliError(f"--config {item}: {error.strerror or error}") from None
        properties.update(parse_properties_text(text, f"--config {item}"))
    for item in args.properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-X expects KEY=VALUE, got {key.strip()!r} without '='")
        properties[key.strip()] = value
    unknown = sorted(set(properties) - set(PROPERTIES) - {"bootstrap.servers", "client.id"})
    if unknown:
        # `streams create` takes stream configs too, but on the command line, as kafka-topics does.
        hint = " (a stream config goes on the command line: --config KEY=VALUE)" if getattr(
            args, "config_pairs", False) else ""
        raise UsageError(f"unknown client propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}{hint}; "
                       f"accepted: bootstrap.servers, client.id, {', '.join(PROPERTIES)}")
    return properties


def open_client(args: argparse.Namespace) -> VdlClient:
    """A client over the `--bootstrap` list (`host:port[,host:port...]`, tried in order), secured
    as the -X / --config properties say."""
    try:
        properties = client_properties(args)
        security = SecuritySettings.from_properties(properties, "-X/--config")
    except SecurityError as error:
        raise UsageError(str(error)) from None
    bootstrap = properties.get("bootstrap.servers", args.bootstrap)
    try:
        servers = parse_bootstrap(bootstrap)
    except BootstrapError:
        raise UsageError(f"--bootstrap must be HOST:PORT[,HOST:PORT...], got {bootstrap!r}") from None
    return VdlClient(ClientSettings(servers, request_timeout_ms=REQUEST_TIMEOUT_MS, deadline_ms=DEADLINE_MS,
                                    client_id=properties.get("client.id", CLIENT_ID), fail_fast_when_unreachable=True,
                                    security=security))


def columns(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns two spaces apart, the header first (trailing spaces trimmed)."""
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
                   for row in table)


def key_values(pairs: list[str] | None, option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise UsageError(f"{option} takes KEY=VALUE, got {pair!r}")
        result[key] = value
    return result


def format_configs(configs: list[DescribedConfig]) -> str:
    """One line per config: name, value, where it comes from; the table's state last."""
    # Read-only entries are the table's state (vdl.table.status.*).
    status = [c for c in configs if c.read_only and c.name.startswith("vdl.table.status.")]
    settings = [c for c in configs if c not in status]
    width = max((len(c.name) for c in configs), default=0)
    values = {c.name: c.value or "-" for c in configs}  # unset or an empty list
    value_width = max((len(values[c.name]) for c in settings), default=0)
    lines = ["configs:"]
    lines += [f"  {c.name:<{width}}  {values[c.name]:<{value_width}}  ({c.source})" for c in settings]
    if status:
        lines.append("table:")
        lines += [f"  {c.name:<{width}}  {c.value}" for c in status]
    return "\n".join(lines) + "\n"


def alter_config_parser(actions: argparse._SubParsersAction[Parser], connection: Parser, kind: str, what: str,
                        reverts_to: str, alter: Callable[[VdlClient, str, dict[str, str], list[str]], None]) -> None:
    """`alter-config NAME --set KEY=VALUE --delete KEY` of a stream or a group (`kind`), by `alter`."""
    parser = actions.add_parser("alter-config", parents=[connection], help=f"set or remove {what}")
    parser.add_argument("name", metavar=kind.upper())
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config (repeatable)")
    parser.add_argument("--delete", action="append", default=[], metavar="KEY",
                        help=f"remove a config: back to {reverts_to} (repeatable)")
    parser.set_defaults(run=partial(_alter_config, kind, alter))


def _alter_config(kind: str, alter: Callable[[VdlClient, str, dict[str, str], list[str]], None],
                  args: argparse.Namespace) -> int:
    to_set = key_values(args.set, "--set")
    if not to_set and not args.delete:
        raise UsageError("alter-config needs --set KEY=VALUE or --delete KEY")
    with open_client(args) as client:
        alter(client, args.name, to_set, args.delete)
    changes = [f"{k}={v}" for k, v in to_set.items()] + [f"{k} (default)" for k in args.delete]
    print(f"altered {kind} {args.name}: {', '.join(changes)}")
    return 0
