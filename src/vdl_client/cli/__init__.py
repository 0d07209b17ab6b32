"""`vdl`: the admin command line, on vdl_client's VdlClient. One module per command group:

    vdl streams create|list|describe|delete [NAME]   streams.py (also reassign, reassignments, elect-preferred)
    vdl nodes list|decommission|remove [ID]          nodes.py: the cluster's nodes
    vdl produce STREAM [--file F]                    records.py: lines of stdin (or F) become records
    vdl consume STREAM --from earliest|latest|OFFSET [--max N]
    vdl groups list|describe GROUP|reset-offsets GROUP --to SPEC   groups.py: consumer groups and lag
    vdl cluster status|upgrade                       cluster.py: is the cluster healthy (exit 1 if not);
                                                     raise its feature level after a rolling upgrade
    vdl users create|list|delete [NAME]              users.py: SCRAM users
    vdl acls list|create|delete                      acls.py: Kafka ACLs
    vdl dev-cluster --nodes 3 --data-dir D           a local cluster in the foreground   } vdl_dev's, through
    vdl demo [--records N]                           the main job: 3-node cluster -> Spark } the plug-in API below

Every command that talks to brokers takes `--bootstrap HOST:PORT[,HOST:PORT...]` (common.py),
tried in order until one answers, as Kafka's tools do, and librdkafka-style client properties
(`-X security.protocol=SASL_SSL -X sasl.mechanism=... -X sasl.username=...`, `--config FILE`). A new command group is a module with a
`register(commands, connection)` function, listed in COMMAND_GROUPS. Other packages plug command
groups in with an entry point in the group `vdl.commands` naming such a module; a module may also
map command names to functions that parse their own arguments (`RAW_COMMANDS`, like `vdl demo`).

A failure prints one line (`vdl: error: ...`) and exits non-zero: 2 for a bad command line (argparse's
own errors and common.UsageError), 1 for anything else (and `cluster status` of an unhealthy cluster).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from types import ModuleType

from vdl_client.cli import acls, cluster, groups, nodes, records, streams, users
from vdl_client.cli.common import CliError, Parser, UsageError, connection_options
from vdl_client.settings import VdlClientError
from vdl_wire.software import VersionAction

COMMAND_GROUPS = (streams, nodes, records, groups, cluster, users, acls)
PLUGIN_GROUP = "vdl.commands"


def command_groups() -> tuple[ModuleType, ...]:
    """The built-in command groups, then those installed packages plug in (entry points)."""
    return COMMAND_GROUPS + tuple(entry.load() for entry in entry_points(group=PLUGIN_GROUP))


def build_parser(groups: tuple[ModuleType, ...]) -> argparse.ArgumentParser:
    parser = Parser(prog="vdl", description="VDL admin command line")
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    connection = connection_options()
    for group in groups:
        group.register(commands, connection)
    return parser


def raw_commands(groups: tuple[ModuleType, ...]) -> dict[str, Callable[[list[str]], int]]:
    return {name: run for group in groups for name, run in getattr(group, "RAW_COMMANDS", {}).items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        loaded = command_groups()
        raw = raw_commands(loaded)
        if argv and argv[0] in raw:
            return raw[argv[0]](argv[1:])
        args = build_parser(loaded).parse_args(argv)
        code: int = args.run(args)
        return code
    except UsageError as error:
        print(f"vdl: error: {error}", file=sys.stderr)
        return 2
    except (CliError, VdlClientError) as error:
        print(f"vdl: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # never a traceback for the user: one line
        print(f"vdl: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
