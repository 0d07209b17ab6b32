"""`vdl`: the admin command line, on vdl_client's VdlClient. One module per command group:

    vdl streams create|list|describe|delete [NAME]   streams.py (also reassign, reassignments, elect-preferred)
    vdl nodes list|decommission|remove [ID]          nodes.py: the cluster's nodes
    vdl produce STREAM [--file F]                    records.py: lines of stdin (or F) become records
    vdl consume STREAM --from earliest|latest|OFFSET [--max N]
    vdl groups list|describe GROUP|reset-offsets GROUP --to SPEC   groups.py: consumer groups and lag
    vdl cluster status                               cluster.py: is the cluster healthy (exit 1 if not)
    vdl users create|list|delete [NAME]              users.py: SCRAM users
    vdl acls list|create|delete                      acls.py: Kafka ACLs
    vdl dev-cluster --nodes 3 --data-dir D           dev.py: a local cluster in the foreground (vdl_dev)
    vdl demo [--records N]                           the main job: 3-node cluster -> Spark -> Delta

Every command that talks to brokers takes `--bootstrap HOST:PORT[,HOST:PORT...]` (common.py),
tried in order until one answers, as Kafka's tools do, and librdkafka-style client properties
(`-X security.protocol=SASL_SSL -X sasl.mechanism=... -X sasl.username=...`, `--config FILE`). A new command group is a module with a
`register(commands, connection)` function, listed in COMMAND_GROUPS.

A failure prints one line (`vdl: error: ...`) and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys

from vdl_client.cli import acls, cluster, dev, groups, nodes, records, streams, users
from vdl_client.cli.common import CliError, Parser, connection_options
from vdl_client.settings import VdlClientError

COMMAND_GROUPS = (streams, nodes, records, groups, cluster, users, acls, dev)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="vdl", description="VDL admin command line")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    connection = connection_options()
    for group in COMMAND_GROUPS:
        group.register(commands, connection)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["demo"]:
            return dev.run_demo_command(argv[1:])
        args = build_parser().parse_args(argv)
        return args.run(args)
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
