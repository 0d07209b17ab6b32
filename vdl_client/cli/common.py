"""What every `vdl` command shares: the one-line error, the argument parser and the client."""

from __future__ import annotations

import argparse
import os
import sys

from vdl_client.client import VdlClient
from vdl_client.connection import BootstrapError, parse_bootstrap
from vdl_client.settings import ClientSettings

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "vdl-cli"
REQUEST_TIMEOUT_MS = 30_000
# Leader elections take about a second; a command waits through a few, not forever.
DEADLINE_MS = 30_000


class CliError(Exception):
    """A failure reported to the user as one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's convention)
        print(f"vdl: error: {message}", file=sys.stderr)
        sys.exit(2)


def connection_options() -> argparse.ArgumentParser:
    """The options of every command that talks to brokers (a parent parser)."""
    parent = Parser(add_help=False)
    parent.add_argument("--bootstrap", default=os.environ.get("VDL_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                        help="brokers HOST:PORT[,HOST:PORT...], tried in order "
                             "(default $VDL_BOOTSTRAP or 127.0.0.1:9092)")
    return parent


def open_client(args: argparse.Namespace) -> VdlClient:
    """A client over the `--bootstrap` list (`host:port[,host:port...]`, tried in order)."""
    try:
        servers = parse_bootstrap(args.bootstrap)
    except BootstrapError:
        raise CliError(f"--bootstrap must be HOST:PORT[,HOST:PORT...], got {args.bootstrap!r}") from None
    return VdlClient(ClientSettings(servers, request_timeout_ms=REQUEST_TIMEOUT_MS, deadline_ms=DEADLINE_MS,
                                    client_id=CLIENT_ID, fail_fast_when_unreachable=True))


def columns(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns two spaces apart, the header first (trailing spaces trimmed)."""
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
                   for row in table)
