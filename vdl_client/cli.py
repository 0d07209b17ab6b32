"""`vdl`: the admin command line, on vdl_client's VdlClient.

    vdl streams create|list|describe|delete [NAME] [--bootstrap HOST:PORT[,HOST:PORT...]]
    vdl produce STREAM [--file F]           lines of stdin (or F) become records
    vdl consume STREAM --from earliest|latest|OFFSET [--max N]
    vdl dev-cluster --nodes 3 --data-dir D  a local cluster in the foreground (vdl_dev)
    vdl demo [--records N]                  the main job: 3-node cluster -> Spark -> Delta (vdl_dev)

--bootstrap servers are tried in order until one answers, as Kafka's tools do.

A failure prints one line (`vdl: error: ...`) and exits non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.records.record_batch import RecordBatchBuilder, iter_batches, read_records
from vdl_client.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, VdlClient
from vdl_client.connection import BootstrapError, parse_bootstrap
from vdl_client.settings import ClientSettings, StreamNotFoundError, VdlClientError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "vdl-cli"
REQUEST_TIMEOUT_MS = 30_000
# Leader elections take about a second; a command waits through a few, not forever.
DEADLINE_MS = 30_000
FETCH_MAX_WAIT_MS = 500
FETCH_PARTITION_MAX_BYTES = 4 << 20
FETCH_MAX_BYTES = 16 << 20
SPARK_EXTRA_MODULES = ("pyspark", "pyarrow", "numpy", "pandas", "deltalake")
BATCH_RECORDS = 5000
BATCH_BYTES = 512 * 1024


class CliError(Exception):
    """A failure reported to the user as one line."""


def open_client(bootstrap: str) -> VdlClient:
    """A client over the `--bootstrap` list (`host:port[,host:port...]`, tried in order)."""
    try:
        servers = parse_bootstrap(bootstrap)
    except BootstrapError:
        raise CliError(f"--bootstrap must be HOST:PORT[,HOST:PORT...], got {bootstrap!r}") from None
    return VdlClient(ClientSettings(servers, request_timeout_ms=REQUEST_TIMEOUT_MS, deadline_ms=DEADLINE_MS,
                                    client_id=CLIENT_ID, fail_fast_when_unreachable=True))


# -- commands -------------------------------------------------------------------------------------


def cmd_streams(args: argparse.Namespace) -> int:
    with open_client(args.bootstrap) as client:
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


def _batches(lines: Iterable[bytes], key_separator: bytes | None) -> Iterator[tuple[bytes, int]]:
    builder = RecordBatchBuilder()
    for raw in lines:
        line = raw.rstrip(b"\r\n")
        key = None
        if key_separator is not None and key_separator in line:
            key, line = line.split(key_separator, 1)
        builder.append(int(time.time() * 1000), key, line)
        if builder.record_count >= BATCH_RECORDS or builder.estimated_size >= BATCH_BYTES:
            yield builder.build(), builder.record_count
            builder = RecordBatchBuilder()
    if builder.record_count:
        yield builder.build(), builder.record_count


def cmd_produce(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    source: BinaryIO
    if args.file is not None:
        try:
            source = open(args.file, "rb")
        except OSError as error:
            raise CliError(f"cannot read {args.file}: {error.strerror}") from None
    else:
        source = sys.stdin.buffer
    separator = args.key_separator.encode() if args.key_separator else None
    count, first, last = 0, -1, -1
    with open_client(args.bootstrap) as client, source, \
            tqdm(unit=" records", desc=f"produce {args.stream}", disable=None, file=sys.stderr) as bar:
        client.leader_of(args.stream)  # a missing stream fails before stdin is read
        for batch, records in _batches(source, separator):
            deadline = time.monotonic() + DEADLINE_MS / 1000
            base = client.produce(args.stream, batch, REQUEST_TIMEOUT_MS, deadline, acks=args.acks)
            if base >= 0:  # acks=0 (and a deduplicated retry) leave the offset unknown
                first = base if first < 0 else first
                last = base + records - 1
            count += records
            bar.update(records)
    if not args.quiet:
        span = f" at offsets {first}..{last}" if count and first >= 0 else ""
        print(f"produced {count} records to {args.stream}{span}", file=sys.stderr)
    return 0


def _start_offset(client: VdlClient, stream: str, spec: str) -> int:
    if spec == "earliest":
        return client.list_offset(stream, EARLIEST_TIMESTAMP)
    if spec == "latest":
        return client.list_offset(stream, LATEST_TIMESTAMP)
    try:
        offset = int(spec)
    except ValueError:
        raise CliError(f"--from must be earliest, latest or an offset, got {spec!r}") from None
    if offset < 0:
        raise CliError(f"--from offset must be >= 0, got {offset}")
    return offset


def cmd_consume(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    with open_client(args.bootstrap) as client:
        offset = _start_offset(client, args.stream, args.from_)
        received = 0
        idle_deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while args.max is None or received < args.max:
            high_watermark, records = _fetch(client, args.stream, offset)
            progressed = False
            for _, batch in iter_batches(records or b""):
                for record in read_records(batch):
                    if record.offset < offset:
                        continue  # the batch holding `offset` starts earlier
                    value = record.value or b""
                    out.write(f"{record.offset}\t".encode() + value + b"\n" if args.print_offsets else value + b"\n")
                    offset = record.offset + 1
                    received += 1
                    progressed = True
                    if args.max is not None and received >= args.max:
                        break
                if args.max is not None and received >= args.max:
                    break
            out.flush()
            if progressed and idle_deadline is not None:
                idle_deadline = time.monotonic() + args.timeout
            if args.end and offset >= high_watermark:
                break
            if idle_deadline is not None and time.monotonic() > idle_deadline:
                break
    return 0


def _fetch(client: VdlClient, stream: str, offset: int) -> tuple[int, memoryview | None]:
    result = client.fetch(stream, offset, FETCH_PARTITION_MAX_BYTES, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS,
                          time.monotonic() + DEADLINE_MS / 1000)
    if result.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise StreamNotFoundError(f"stream {stream!r} does not exist")
    if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
        raise CliError(f"OFFSET_OUT_OF_RANGE: offset {offset} is outside stream {stream!r} "
                       f"({result.log_start_offset}..{result.high_watermark})")
    return result.high_watermark, result.records


def run_demo_command(argv: list[str]) -> int:
    """`vdl demo ARGS`: vdl_dev parses its own arguments. It is imported only here, so the rest
    of the CLI works in an install without the [spark] extra."""
    try:
        for name in SPARK_EXTRA_MODULES:
            importlib.import_module(name)
        from vdl_dev.run import main as demo_main
    except ImportError as error:
        raise CliError(f"`vdl demo` needs the Spark extra (pip install 'vdl-for-spark[spark]'): {error}") from None

    return demo_main(argv)


def cmd_dev_cluster(args: argparse.Namespace) -> int:
    from vdl_dev.dev_cluster import run_dev_cluster  # imported only when asked for

    if args.nodes < 1:
        raise CliError(f"--nodes must be at least 1, got {args.nodes}")
    try:
        return run_dev_cluster(args.nodes, args.data_dir, args.base_port)
    except ValueError as error:
        raise CliError(str(error)) from None


# -- entry point ----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's convention)
        print(f"vdl: error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vdl", description="VDL admin command line")
    bootstrap = _Parser(add_help=False)
    bootstrap.add_argument("--bootstrap", default=os.environ.get("VDL_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                           help="brokers HOST:PORT[,HOST:PORT...], tried in order "
                                "(default $VDL_BOOTSTRAP or 127.0.0.1:9092)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    streams = commands.add_parser("streams", help="create, list, describe or delete streams")
    actions = streams.add_subparsers(dest="action", required=True, parser_class=_Parser)
    for action in ("create", "describe", "delete"):
        sub = actions.add_parser(action, parents=[bootstrap])
        sub.add_argument("name")
        if action == "create":
            sub.add_argument("--replication-factor", type=int, default=-1,
                             help="1, 3 or 5 (default: 3, or every node of a smaller cluster)")
    actions.add_parser("list", parents=[bootstrap])
    streams.set_defaults(run=cmd_streams)

    produce = commands.add_parser("produce", parents=[bootstrap], help="produce lines as records")
    produce.add_argument("stream")
    produce.add_argument("--file", type=Path, help="read lines from this file instead of stdin")
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--acks", type=int, choices=(0, 1, -1), default=-1)
    produce.add_argument("--quiet", action="store_true")
    produce.set_defaults(run=cmd_produce)

    consume = commands.add_parser("consume", parents=[bootstrap], help="print records, one per line")
    consume.add_argument("stream")
    consume.add_argument("--from", dest="from_", default="earliest", help="earliest, latest or an offset")
    consume.add_argument("--max", type=int, help="stop after N records")
    consume.add_argument("--end", action="store_true", help="stop at the end of the stream")
    consume.add_argument("--timeout", type=float, help="stop after this many seconds without records")
    consume.add_argument("--print-offsets", action="store_true", help="prefix each value with its offset")
    consume.set_defaults(run=cmd_consume)

    # Only listed here (for `vdl --help`); main() hands everything after `demo` to vdl_dev.
    commands.add_parser("demo", add_help=False,
                        help="run the demo: a local 3-node cluster, Spark, and a Delta table "
                             "(`vdl demo --help` for its options)")

    dev = commands.add_parser("dev-cluster", help="run a local replicated cluster in the foreground")
    dev.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    dev.add_argument("--data-dir", type=Path, required=True, help="node<i>/ directories go here")
    dev.add_argument("--base-port", type=int, default=9092,
                     help="client ports P..P+n-1, raft ports P+n..P+2n-1 (default 9092)")
    dev.set_defaults(run=cmd_dev_cluster)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["demo"]:
            return run_demo_command(argv[1:])
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


if __name__ == "__main__":
    sys.exit(main())
