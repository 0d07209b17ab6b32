"""Hostile clients get the documented error or a closed connection, while a healthy client
running at the same time sees no error and no stall."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import BrokerProcess
from tests.support.kafka import (
    client,
    closed_by_peer,
    encode,
    make_batch,
    produce_request,
    raw_socket,
    read_frame,
)
from vdl_wire import api
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

MAX_REQUEST = 1 << 20
STALL_LIMIT_S = 2.0
API_VERSIONS = m.ApiVersionsRequest.DECL.api_key
PRODUCE = m.ProduceRequest.DECL.api_key


class Healthy:
    """Produces and fetches in a loop, recording errors and the slowest round trip."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.errors: list[BaseException] = []
        self.worst = 0.0
        self.rounds = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        try:
            with client(self.bootstrap) as c:
                offset = 0
                while not self.stop.is_set():
                    started = time.monotonic()
                    base = c.produce("healthy", make_batch([b"ok-%d" % self.rounds]), acks=-1)
                    assert base == offset, (base, offset)
                    _, records = c.fetch("healthy", offset, max_wait_ms=1000)
                    assert records, "fetch returned nothing below the high watermark"
                    offset += 1
                    self.rounds += 1
                    self.worst = max(self.worst, time.monotonic() - started)
        except BaseException as error:
            self.errors.append(error)


@pytest.fixture(scope="module")
def hostile_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Healthy]]:
    from tests.support.cluster import start_broker

    broker = start_broker(tmp_path_factory.mktemp("hostile"), max_request_bytes=MAX_REQUEST)
    with client(broker.bootstrap) as c:
        c.create_stream("healthy")
        c.create_stream("big")
        for _ in range(8):  # ~4 MiB for the client that never reads
            c.produce("big", make_batch([b"x" * 1000] * 500), acks=1)
    healthy = Healthy(broker.bootstrap)
    healthy.thread.start()
    yield broker, healthy
    healthy.stop.set()
    healthy.thread.join(10)
    assert broker.alive(), "the broker died"
    assert not healthy.errors, f"healthy client saw {healthy.errors!r}"
    assert healthy.rounds > 10
    assert healthy.worst < STALL_LIMIT_S, f"healthy client stalled for {healthy.worst:.2f}s"
    broker.kill()


def test_random_bytes_close_the_connection(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, _ = hostile_broker
    rng = random.Random(4)
    for _ in range(5):
        with raw_socket(broker.bootstrap) as sock:
            body = rng.randbytes(200)
            sock.sendall(struct.pack(">i", len(body)) + body)
            assert closed_by_peer(sock)
    with raw_socket(broker.bootstrap) as sock:  # garbage whose "length" is huge
        sock.sendall(b"\xff\xfe" + rng.randbytes(500))
        assert closed_by_peer(sock)


def test_frame_over_the_limit_is_refused_before_its_body(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, _ = hostile_broker
    with raw_socket(broker.bootstrap) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST * 4))  # only the length prefix
        assert closed_by_peer(sock)


def test_unknown_api_key_closes(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, _ = hostile_broker
    with raw_socket(broker.bootstrap) as sock:
        body = struct.pack(">hhih", 999, 0, 7, 4) + b"test"
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert closed_by_peer(sock)


def test_unsupported_versions(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, _ = hostile_broker
    with raw_socket(broker.bootstrap) as sock:
        # ApiVersions v9: answered in v0 with UNSUPPORTED_VERSION and our ranges (KIP-511).
        body = struct.pack(">hhih", API_VERSIONS, 9, 42, 4) + b"test"
        sock.sendall(struct.pack(">i", len(body)) + body)
        correlation_id, response = api.decode_response(API_VERSIONS, 0, read_frame(sock))
        assert correlation_id == 42 and response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}[API_VERSIONS] == (0, 4)
    with raw_socket(broker.bootstrap) as sock:  # Produce v99: closed, as Kafka does
        body = struct.pack(">hhih", PRODUCE, 99, 43, 4) + b"test"
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert closed_by_peer(sock)


def test_bad_crc_and_unknown_stream(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, _ = hostile_broker
    good = make_batch([b"a", b"b"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # flips a byte under the CRC
    with client(broker.bootstrap) as c:
        c.create_stream("crc")
        response = c.request(produce_request("crc", bytes(bad)), 7)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
        response = c.request(produce_request("no-such-stream", good), 7)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        response = c.request(produce_request("crc", good, partition=1), 7)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # The rejected batch left nothing behind: the next good batch lands at offset 0.
        assert c.produce("crc", good) == 0


def test_client_that_never_reads(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, healthy = hostile_broker
    fetch = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, topics=[
        m.FetchRequest.FetchTopic(topic="big", partitions=[
            m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=8 << 20)])])
    frame = encode(fetch, 11)
    sock = raw_socket(broker.bootstrap)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    sent = 0
    rounds_before = healthy.rounds
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # pipeline fetches of ~4 MiB each and never read
        try:
            sent += sock.send(frame)
        except BlockingIOError:
            time.sleep(0.01)
    # The broker stopped reading from this client (its buffers are bounded) ...
    assert sent < 64 * len(frame) * 1000
    # ... and the healthy client kept going meanwhile.
    assert healthy.rounds > rounds_before
    sock.close()


def test_healthy_client_round_trips(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    _, healthy = hostile_broker
    deadline = time.monotonic() + 5
    while healthy.rounds < 20:
        assert time.monotonic() < deadline and not healthy.errors, healthy.errors
        time.sleep(0.01)


def test_half_closed_client_still_gets_its_answer(hostile_broker: tuple[BrokerProcess, Healthy]) -> None:
    broker, _ = hostile_broker
    with raw_socket(broker.bootstrap) as sock:
        sock.sendall(encode(m.ApiVersionsRequest(), 0, correlation_id=5))
        sock.shutdown(socket.SHUT_WR)
        correlation_id, response = api.decode_response(API_VERSIONS, 0, read_frame(sock))
        assert correlation_id == 5 and response.error_code == 0
        assert closed_by_peer(sock)
