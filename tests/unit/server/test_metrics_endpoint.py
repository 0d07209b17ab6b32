"""The metrics layer alone: the error a response carries (vdl_requests_total's `error` label),
per-request and per-stream counting, a deleted stream's series, and the HTTP endpoint as a
scraper and a stray client speak to it (keep-alive, HTTP/1.0, HEAD, 404, 405, bad request lines,
oversized heads)."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from tests.support.waiting import within
from vdl_broker.metrics import BrokerMetrics, MetricsEndpoint
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.response_errors import response_error

TIER = "component"  # real sockets, threads or sleeps in this process


def _samples(metrics: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = metrics.exposition(None)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def test_response_error_finds_the_first_error_at_any_depth() -> None:
    ok = m.ProduceResponse(responses=[m.ProduceResponse.TopicProduceResponse(name="s", partition_responses=[
        m.ProduceResponse.PartitionProduceResponse(index=0, error_code=0)])])
    assert response_error(ok) == 0
    failed = m.ProduceResponse(responses=[
        m.ProduceResponse.TopicProduceResponse(name="a", partition_responses=[
            m.ProduceResponse.PartitionProduceResponse(index=0, error_code=0)]),
        m.ProduceResponse.TopicProduceResponse(name="b", partition_responses=[
            m.ProduceResponse.PartitionProduceResponse(index=0, error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER))])])
    assert response_error(failed) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # A top-level error comes before the parts' (Fetch: a session error, no partitions).
    assert response_error(m.FetchResponse(error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))) == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert response_error(None) == 0  # Produce acks=0: no answer, no error


def test_counting_per_request_and_per_stream() -> None:
    metrics = BrokerMetrics()
    metrics.request_done("Produce", 8, 0, 0.002)
    metrics.request_done("Produce", 8, 0, 0.2)
    metrics.request_done("Produce", 8, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 0.001)
    metrics.request_done("Fetch", 11, 12345, 0.5)  # a code we do not know keeps its number
    metrics.produced("s", 100, 3)
    metrics.produced("s", 50, 2)
    metrics.fetched("s", 150)
    samples = _samples(metrics)
    produce = (("api", "Produce"), ("error", "NONE"), ("version", "8"))
    assert samples[("vdl_requests_total", produce)] == 2
    assert samples[("vdl_requests_total", (("api", "Produce"), ("error", "NOT_LEADER_OR_FOLLOWER"),
                                           ("version", "8")))] == 1
    assert samples[("vdl_requests_total", (("api", "Fetch"), ("error", "12345"), ("version", "11")))] == 1
    assert samples[("vdl_request_latency_seconds_count", (("api", "Produce"),))] == 3
    assert samples[("vdl_request_latency_seconds_bucket", (("api", "Produce"), ("le", "0.0025")))] == 2
    assert samples[("vdl_bytes_in_total", (("stream", "s"),))] == 150
    assert samples[("vdl_records_in_total", (("stream", "s"),))] == 5
    assert samples[("vdl_bytes_out_total", (("stream", "s"),))] == 150
    metrics.forget_stream("s")
    assert not [key for key in _samples(metrics) if ("stream", "s") in key[1]]
    metrics.produced("s", 10, 1)  # created again: counts from zero
    assert _samples(metrics)[("vdl_records_in_total", (("stream", "s"),))] == 1


async def _exchange(port: int, data: bytes) -> bytes:
    """Send `data`, read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await within(reader.read(), 5)
    finally:
        writer.close()


def _responses(raw: bytes) -> list[tuple[str, bytes]]:
    """(status line, body) of each response in `raw`, by Content-Length."""
    answers = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length"))
        answers.append((lines[0], rest[:length]))
        raw = rest[length:]
    return answers


def test_endpoint_answers_scrapers_and_refuses_the_rest() -> None:
    async def scenario() -> None:
        metrics = BrokerMetrics()
        metrics.produced("orders", 10, 1)
        endpoint = MetricsEndpoint(metrics, "127.0.0.1", 0)
        await endpoint.start()
        port = endpoint.port
        try:
            # Keep-alive: two scrapes on one connection, then one that asks to close.
            raw = await _exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                                        b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                                        b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            answers = _responses(raw)
            assert [status for status, _ in answers] == ["HTTP/1.1 200 OK"] * 3
            assert all(b'vdl_records_in_total{stream="orders"} 1.0' in body for _, body in answers)
            # HTTP/1.0 closes after one answer; HEAD has no body.
            assert (await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
            head = await _exchange(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
            assert (await _exchange(port, b"GET / HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 404 Not Found")
            assert (await _exchange(port, b"POST /metrics HTTP/1.0\r\n\r\n")).startswith(
                b"HTTP/1.1 405 Method Not Allowed")
            assert (await _exchange(port, b"hello\r\n\r\n")).startswith(b"HTTP/1.1 400 Bad Request")
            assert (await _exchange(port, b"GET /metrics HTTP/1.1\r\nX: " + b"y" * 70_000)).startswith(
                b"HTTP/1.1 431")
            # A client that leaves half-way does not disturb the next one.
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /met")
            await writer.drain()
            writer.close()
            assert (await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
        finally:
            await endpoint.stop()

    asyncio.run(scenario())
