"""`vdl`: the admin command line. Speaks the Kafka protocol through vdl_broker.protocol.

    vdl streams create|list|describe|delete [NAME] [--bootstrap HOST:PORT]
    vdl produce STREAM [--file F]           lines of stdin (or F) become records
    vdl consume STREAM --from earliest|latest|OFFSET [--max N]
    vdl demo [--records N]                  the main job: 3-node cluster -> Spark -> Delta

A failure prints one line (`vdl: error: ...`) and exits non-zero.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import struct
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from vdl_broker.demo.run import add_demo_parser
from vdl_broker.protocol import api
from vdl_broker.protocol import messages as m
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.records.record_batch import RecordBatchBuilder, iter_batches, read_records

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "vdl-cli"
# Versions the CLI speaks (all inside the broker's ApiVersions table).
METADATA_V, CREATE_V, DELETE_V, PRODUCE_V, FETCH_V, LIST_OFFSETS_V = 1, 1, 1, 7, 10, 1
BATCH_RECORDS = 5000
BATCH_BYTES = 512 * 1024


class CliError(Exception):
    """A failure reported to the user as one line."""


@dataclass
class KafkaClient:
    """A minimal blocking client: one connection, one request at a time."""

    bootstrap: str
    timeout: float = 30.0
    _sock: socket.socket | None = None
    # One counter per client (a class-level default would be shared by every instance).
    _correlation: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def connect(self) -> KafkaClient:
        host, _, port = self.bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise CliError(f"--bootstrap must be HOST:PORT, got {self.bootstrap!r}")
        try:
            self._sock = socket.create_connection((host, int(port)), timeout=self.timeout)
        except OSError as error:
            raise CliError(f"cannot connect to {self.bootstrap}: {error.strerror or error}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> KafkaClient:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, request: Any) -> Any:
        assert self._sock is not None
        correlation_id = next(self._correlation)
        try:
            self._sock.sendall(b"".join(bytes(b) for b in api.encode_request(
                api_key, version, correlation_id, CLIENT_ID, request)))
            (size,) = struct.unpack(">i", self._recv(4))
            frame = self._recv(size)
        except (OSError, EOFError) as error:
            raise CliError(f"connection to {self.bootstrap} failed: {error}") from None
        got, response = api.decode_response(api_key, version, frame)
        if got != correlation_id:
            raise CliError(f"response correlation id {got} does not match request {correlation_id}")
        return response

    def _recv(self, size: int) -> bytes:
        assert self._sock is not None
        chunks, remaining = [], size
        while remaining:
            chunk = self._sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise EOFError("the broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    # -- operations ---------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None) -> Any:
        request = m.MetadataRequest(
            topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
        return self.request(3, METADATA_V, request)

    def create_stream(self, name: str, replication_factor: int = -1) -> None:
        topic = m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1,
                                                     replication_factor=replication_factor)
        response = self.request(19, CREATE_V, m.CreateTopicsRequest(topics=[topic], timeout_ms=30_000))
        _check(response.topics[0].error_code, response.topics[0].error_message, name)

    def delete_stream(self, name: str) -> None:
        response = self.request(20, DELETE_V, m.DeleteTopicsRequest(topic_names=[name], timeout_ms=30_000))
        _check(response.responses[0].error_code, None, name)

    def list_offset(self, stream: str, timestamp: int) -> int:
        partition = m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
        topic = m.ListOffsetsRequest.ListOffsetsTopic(name=stream, partitions=[partition])
        response = self.request(2, LIST_OFFSETS_V, m.ListOffsetsRequest(replica_id=-1, topics=[topic]))
        result = response.topics[0].partitions[0]
        _check(result.error_code, None, stream)
        return result.offset

    def produce(self, stream: str, batch: bytes, acks: int = -1) -> int:
        data = m.ProduceRequest.PartitionProduceData(index=0, records=batch)
        topic = m.ProduceRequest.TopicProduceData(name=stream, partition_data=[data])
        response = self.request(0, PRODUCE_V, m.ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[topic]))
        result = response.responses[0].partition_responses[0]
        _check(result.error_code, result.error_message, stream)
        return result.base_offset

    def fetch(self, stream: str, offset: int, max_wait_ms: int = 500) -> tuple[int, Any]:
        partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=4 << 20)
        topic = m.FetchRequest.FetchTopic(topic=stream, partitions=[partition])
        request = m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=16 << 20,
                                 topics=[topic])
        response = self.request(1, FETCH_V, request)
        result = response.responses[0].partitions[0]
        _check(result.error_code, None, stream)
        return result.high_watermark, result.records


def _check(code: int, message: str | None, stream: str) -> None:
    if code == 0:
        return
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    hints = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: f"stream {stream!r} does not exist",
             ErrorCode.TOPIC_ALREADY_EXISTS: f"stream {stream!r} already exists",
             ErrorCode.OFFSET_OUT_OF_RANGE: f"offset out of range for stream {stream!r}"}
    detail = message or hints.get(ErrorCode(code) if code in ErrorCode._value2member_map_ else None, "")
    raise CliError(f"{name}: {detail}" if detail else name)


# -- commands -------------------------------------------------------------------------------------


def leader_address(client: KafkaClient, stream: str) -> str:
    """HOST:PORT of the node leading `stream` (in a replicated cluster only the leader serves
    produce, fetch and list-offsets), or the client's own address when Metadata names none."""
    metadata = client.metadata([stream])
    leader = next((p.leader_id for t in metadata.topics if t.name == stream and t.error_code == 0
                   for p in t.partitions if p.partition_index == 0), -1)
    broker = next((b for b in metadata.brokers if b.node_id == leader), None)
    return f"{broker.host}:{broker.port}" if broker is not None else client.bootstrap


def stream_leader(bootstrap: str, stream: str) -> str:
    with KafkaClient(bootstrap) as client:
        return leader_address(client, stream)


def cmd_streams(args: argparse.Namespace) -> int:
    with KafkaClient(args.bootstrap) as client:
        if args.action == "create":
            client.create_stream(args.name, args.replication_factor)
            print(f"created stream {args.name}")
        elif args.action == "delete":
            client.delete_stream(args.name)
            print(f"deleted stream {args.name}")
        elif args.action == "list":
            for topic in sorted(client.metadata(None).topics, key=lambda t: t.name):
                print(topic.name)
        else:
            metadata = client.metadata([args.name])
            topic = metadata.topics[0]
            _check(topic.error_code, None, args.name)
            leader = topic.partitions[0].leader_id if topic.partitions else -1
            with KafkaClient(leader_address(client, args.name)) as at_leader:
                start = at_leader.list_offset(args.name, -2)
                end = at_leader.list_offset(args.name, -1)
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
    with KafkaClient(stream_leader(args.bootstrap, args.stream)) as client, source, \
            tqdm(unit=" records", desc=f"produce {args.stream}", disable=None, file=sys.stderr) as bar:
        for batch, records in _batches(source, separator):
            base = client.produce(args.stream, batch, acks=args.acks)
            first = base if first < 0 else first
            last = base + records - 1
            count += records
            bar.update(records)
    if not args.quiet:
        span = f" at offsets {first}..{last}" if count else ""
        print(f"produced {count} records to {args.stream}{span}", file=sys.stderr)
    return 0


def _start_offset(client: KafkaClient, stream: str, spec: str) -> int:
    if spec == "earliest":
        return client.list_offset(stream, -2)
    if spec == "latest":
        return client.list_offset(stream, -1)
    try:
        offset = int(spec)
    except ValueError:
        raise CliError(f"--from must be earliest, latest or an offset, got {spec!r}") from None
    if offset < 0:
        raise CliError(f"--from offset must be >= 0, got {offset}")
    return offset


def cmd_consume(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    with KafkaClient(stream_leader(args.bootstrap, args.stream)) as client:
        offset = _start_offset(client, args.stream, args.from_)
        received = 0
        idle_deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while args.max is None or received < args.max:
            high_watermark, records = client.fetch(args.stream, offset)
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


def cmd_dev_cluster(args: argparse.Namespace) -> int:
    from vdl_broker.dev_cluster import run_dev_cluster

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
                           help="broker HOST:PORT (default $VDL_BOOTSTRAP or 127.0.0.1:9092)")
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

    add_demo_parser(commands)

    dev = commands.add_parser("dev-cluster", help="run a local replicated cluster in the foreground")
    dev.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    dev.add_argument("--data-dir", type=Path, required=True, help="node<i>/ directories go here")
    dev.add_argument("--base-port", type=int, default=9092,
                     help="client ports P..P+n-1, raft ports P+n..P+2n-1 (default 9092)")
    dev.set_defaults(run=cmd_dev_cluster)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as error:
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
