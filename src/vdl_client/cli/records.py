"""`vdl produce` and `vdl consume`: lines in, records out."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from vdl_client.cli.common import DEADLINE_MS, REQUEST_TIMEOUT_MS, CliError, Parser, UsageError, open_client
from vdl_client.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, VdlClient
from vdl_client.settings import StreamNotFoundError
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

FETCH_MAX_WAIT_MS = 500
FETCH_PARTITION_MAX_BYTES = 4 << 20
FETCH_MAX_BYTES = 16 << 20
BATCH_RECORDS = 5000
BATCH_BYTES = 512 * 1024


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
    with open_client(args) as client, source, \
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
        raise UsageError(f"--from must be earliest, latest or an offset, got {spec!r}") from None
    if offset < 0:
        raise UsageError(f"--from offset must be >= 0, got {offset}")
    return offset


def cmd_consume(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    with open_client(args) as client:
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


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    produce = commands.add_parser("produce", parents=[connection], help="produce lines as records")
    produce.add_argument("stream")
    produce.add_argument("--file", type=Path, help="read lines from this file instead of stdin")
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--acks", type=int, choices=(0, 1, -1), default=-1)
    produce.add_argument("--quiet", action="store_true")
    produce.set_defaults(run=cmd_produce)

    consume = commands.add_parser("consume", parents=[connection], help="print records, one per line")
    consume.add_argument("stream")
    consume.add_argument("--from", dest="from_", default="earliest", help="earliest, latest or an offset")
    consume.add_argument("--max", "--max-messages", type=int, help="stop after N records")
    consume.add_argument("--end", action="store_true", help="stop at the end of the stream")
    consume.add_argument("--timeout", type=float, help="stop after this many seconds without records")
    consume.add_argument("--print-offsets", action="store_true", help="prefix each value with its offset")
    consume.set_defaults(run=cmd_consume)
