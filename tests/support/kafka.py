"""Helpers for tests that talk to a broker through our own protocol client (vdl_broker.cli)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from vdl_broker.cli import KafkaClient
from vdl_broker.protocol import api
from vdl_broker.protocol import messages as m
from vdl_broker.protocol.records.record_batch import RecordBatchBuilder


def client(bootstrap: str, timeout: float = 10.0) -> KafkaClient:
    return KafkaClient(bootstrap, timeout=timeout).connect()


def make_batch(values: list[bytes], producer_id: int = -1, epoch: int = -1, base_sequence: int = -1,
               keys: list[bytes] | None = None) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(now, keys[i] if keys else None, value)
    return builder.build()


def numbered_batch(n: int, producer_id: int = -1, seq: int = -1) -> bytes:
    """A RecordBatch of `n` values b"v0".. with fixed timestamps (idempotent when producer_id >= 0)."""
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=seq)
    for i in range(n):
        builder.append(1_000 + i, None, b"v%d" % i)
    return builder.build()


def produce_request(stream: str, records: bytes, acks: int = -1, partition: int = 0) -> object:
    data = m.ProduceRequest.PartitionProduceData(index=partition, records=records)
    return m.ProduceRequest(acks=acks, timeout_ms=10_000,
                            topic_data=[m.ProduceRequest.TopicProduceData(name=stream, partition_data=[data])])


def produce_raw(c: KafkaClient, stream: str, records: bytes, version: int = 7, partition: int = 0) -> object:
    """The partition response of one produce (no error checking)."""
    response = c.request(0, version, produce_request(stream, records, partition=partition))
    return response.responses[0].partition_responses[0]


def raw_socket(bootstrap: str, timeout: float = 5.0) -> socket.socket:
    host, _, port = bootstrap.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    return sock


def encode(api_key: int, version: int, request: object, correlation_id: int = 1) -> bytes:
    return b"".join(bytes(b) for b in api.encode_request(api_key, version, correlation_id, "test", request))


def read_frame(sock: socket.socket) -> bytes:
    """One response frame body; b"" if the broker closed the connection."""
    head = _recv_exact(sock, 4)
    if len(head) < 4:
        return b""
    (size,) = struct.unpack(">i", head)
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        try:
            chunk = sock.recv(size)
        except ConnectionResetError:
            return b""
        if not chunk:
            return b""
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def raw_request(address: str, api_key: int, version: int, request: object, timeout: float = 5.0) -> Any:
    """One request on a fresh connection through vdl_broker.protocol.api; the decoded response."""
    with raw_socket(address, timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(encode(api_key, version, request, correlation_id=7))
        body = read_frame(sock)
    if not body:
        raise ConnectionError(f"{address} closed the connection before answering API {api_key}")
    correlation_id, response = api.decode_response(api_key, version, body)
    assert correlation_id == 7, f"correlation id {correlation_id} != 7"
    return response
