"""The demo workload: deterministic, well-formed, the oracle agrees with a direct count, and the
`--follow` producer sends a batch per tick."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from decimal import Decimal

from tests.support.waiting import wait_until
from vdl_client import ClientSettings, VdlClient
from vdl_dev.workload import (
    CHUNK,
    WINDOW_MS,
    SteadyProducer,
    WorkloadConfig,
    _event_ms,
    events,
    expected_aggregates,
    generate,
    produce_workload,
)
from vdl_wire.records.record_batch import iter_batches


def test_same_seed_same_events_different_seed_different_events() -> None:
    config = WorkloadConfig(records=CHUNK + 123, seed=7)
    first = list(events(config))
    assert first == list(events(config))
    assert len(first) == CHUNK + 123
    assert list(events(WorkloadConfig(records=1000, seed=7))) == first[:1000]  # prefix-stable
    assert list(events(WorkloadConfig(records=1000, seed=8))) != first[:1000]
    assert list(events(config, start=CHUNK - 5)) == first[CHUNK - 5:]  # a suffix starts anywhere


def test_the_events_are_the_workload_s_fixed_definition() -> None:
    """Byte for byte, whatever generates them: the first event, and a digest of the first 120,000
    (across chunks) as the workload has always produced them (tests and notebooks compare runs)."""
    first_key, first_value = next(events(WorkloadConfig(records=1)))
    assert first_key == b"c-18211"
    assert first_value == (b'{"order_id":"o-00000000","customer_id":"c-18211","event_time":"2025-12-31T23:59:59.554Z",'
                           b'"category":"toys","product_id":"toys-035","quantity":3,"unit_price":32.27,"amount":96.81,'
                           b'"country":"GB","payment":"invoice"}')
    digest = hashlib.sha256()
    for key, value in events(WorkloadConfig(records=120_000)):
        digest.update(key + b"=" + value + b"\n")
    assert digest.hexdigest() == "a6d73a72e7a6a1a59315e64091751486fc97fa77ea307d46932359c4793a9aae"


def test_events_are_keyed_json_with_bounded_disorder() -> None:
    config = WorkloadConfig(records=5000, seed=1)
    previous_max = 0
    for index, (key, value) in enumerate(events(config)):
        event = json.loads(value)
        assert key == event["customer_id"].encode()
        assert event["order_id"] == f"o-{index:08d}"
        assert Decimal(str(event["amount"])) == Decimal(str(event["unit_price"])) * event["quantity"]
        event_ms = _event_ms(event["event_time"])
        on_time = config.start_ms + index * 1000 // config.events_per_second
        assert on_time - config.max_lateness_ms <= event_ms <= on_time
        assert event_ms >= previous_max - config.max_lateness_ms - 1000 // config.events_per_second
        previous_max = max(previous_max, event_ms)


def test_chunks_are_arrow_binary_columns() -> None:
    chunks = list(generate(WorkloadConfig(records=CHUNK + 10)))
    assert [c.count for c in chunks] == [CHUNK, 10]
    assert chunks[1].first == CHUNK
    assert str(chunks[0].keys.type) == "binary" and str(chunks[0].values.type) == "binary"


def test_oracle_matches_a_direct_count() -> None:
    values = [v for _, v in events(WorkloadConfig(records=3000, seed=3))]
    rows = expected_aggregates(values)
    parsed = [json.loads(v) for v in values]
    counts = Counter((_event_ms(e["event_time"]) // WINDOW_MS * WINDOW_MS, e["category"]) for e in parsed)
    assert {(r.window_start_ms, r.category): r.orders for r in rows} == dict(counts)
    assert sum(r.units for r in rows) == sum(e["quantity"] for e in parsed)
    assert sum(r.revenue for r in rows) == sum(Decimal(str(e["amount"])) for e in parsed)
    assert all(r.revenue.as_tuple().exponent == -2 for r in rows)


def test_produced_records_are_the_generated_events(broker) -> None:  # noqa: ANN001 - tests/conftest.py fixture
    from kafka import KafkaConsumer, TopicPartition

    config = WorkloadConfig(records=CHUNK + 2000, seed=5)
    with VdlClient(ClientSettings((broker.bootstrap,))) as client:
        client.create_streams(["orders"])
    first = produce_workload(broker.bootstrap, "orders", WorkloadConfig(records=3000, seed=5), progress=False)
    rest = produce_workload(broker.bootstrap, "orders", config, start=3000, progress=False, batch_bytes=64 << 10)
    assert (first.records, first.first_offset, rest.records, rest.last_offset) == (3000, 0, CHUNK - 1000, CHUNK + 1999)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    partition = TopicPartition("orders", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: list[tuple[bytes, bytes]] = []
    while len(got) < config.records:
        for records in consumer.poll(timeout_ms=2000).values():
            got.extend((r.key, r.value) for r in records)
    consumer.close()
    assert got == list(events(config))


def test_the_steady_producer_sends_one_batch_per_tick(broker) -> None:  # noqa: ANN001 - tests/conftest.py fixture
    """`vdl demo --follow`'s producer: every tick the events due by then, as one batch, not a batch
    per round trip as soon as the last one was acknowledged (which was 88 batches in 1.2 s here, and
    ~170 a second on three nodes, each a replicated, synced append: most of their CPU)."""
    rate, tick_s = 5_000, 0.1
    config = WorkloadConfig(records=10**9, seed=7, events_per_second=rate)
    with VdlClient(ClientSettings((broker.bootstrap,))) as client:
        client.create_streams(["steady"])
        started = time.monotonic()
        producer = SteadyProducer(broker.bootstrap, "steady", config, rate, tick_s=tick_s).start()
        wait_until(lambda: producer.produced >= rate, timeout=30, message="a second's worth of events")
        produced = producer.stop()
        elapsed = time.monotonic() - started
        batches: list[tuple[int, int]] = []  # (base offset, records) of each stored batch
        while not batches or batches[-1][0] + batches[-1][1] < produced:
            offset = batches[-1][0] + batches[-1][1] if batches else 0
            fetched = client.fetch("steady", offset, 1 << 20, 1 << 20, 0, time.monotonic() + 30)
            assert fetched.records, f"nothing at offset {offset} of {produced} acknowledged records"
            batches += [(h.base_offset, h.last_offset_delta + 1) for h, _ in iter_batches(fetched.records)]

    assert [base for base, _ in batches] == [sum(n for _, n in batches[:i]) for i in range(len(batches))]
    assert sum(n for _, n in batches) == produced
    assert len(batches) <= elapsed / tick_s + 2, (len(batches), elapsed, [n for _, n in batches])
