"""`vdl demo` and `vdl dev-cluster`: vdl_dev's commands, plugged into the `vdl` command line through
the `vdl.commands` entry point (vdl_client.cli loads it; it never imports vdl_dev). The Spark side
is imported only when asked for, so the rest of the CLI works in an install without the [spark]
extra."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from vdl_client.cli.common import CliError, UsageError

SPARK_EXTRA_MODULES = ("pyspark", "delta", "pyarrow", "numpy", "pandas", "deltalake")


def run_demo_command(argv: list[str]) -> int:
    """`vdl demo ARGS`: vdl_dev parses its own arguments."""
    try:
        for name in SPARK_EXTRA_MODULES:
            importlib.import_module(name)
        from vdl_dev.run import main as demo_main
    except ImportError as error:
        raise CliError(f"`vdl demo` needs the Spark extra (pip install 'vdl-for-spark[spark]'): {error}") from None

    return demo_main(argv)


def cmd_dev_cluster(args: argparse.Namespace) -> int:
    from vdl_dev.dev_cluster import run_dev_cluster

    if args.nodes < 1:
        raise UsageError(f"--nodes must be at least 1, got {args.nodes}")
    try:
        settings = {"auto_create_streams": True} if args.auto_create_streams else None
        return run_dev_cluster(args.nodes, args.data_dir, args.base_port, settings=settings, secure=args.secure)
    except ValueError as error:
        raise CliError(str(error)) from None


# Commands that parse their own arguments: `vdl demo ARGS` hands ARGS to run_demo_command.
RAW_COMMANDS = {"demo": run_demo_command}


def register(commands: argparse._SubParsersAction, connection: argparse.ArgumentParser) -> None:
    # Only listed here (for `vdl --help`); main() hands everything after `demo` to RAW_COMMANDS.
    commands.add_parser("demo", add_help=False,
                        help="run the demo: a local 3-node cluster, Spark, and a Delta table "
                             "(`vdl demo --help` for its options)")

    dev = commands.add_parser("dev-cluster", help="run a local replicated cluster in the foreground")
    dev.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    dev.add_argument("--data-dir", type=Path, required=True, help="node<i>/ directories go here")
    dev.add_argument("--base-port", type=int, default=9092,
                     help="client ports P..P+n-1, raft ports P+n..P+2n-1 (default 9092)")
    dev.add_argument("--secure", action="store_true",
                     help="SASL_SSL listeners, Raft over mutual TLS, ACLs and an admin super user, with a throw-away "
                          "CA; prints the client properties")
    dev.add_argument("--auto-create-streams", action="store_true",
                     help="create a stream on its first Metadata or Produce, as Kafka's auto.create.topics.enable "
                          "(clients' own test suites expect it)")
    dev.set_defaults(run=cmd_dev_cluster)
