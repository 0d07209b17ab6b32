"""Kafka Streams 4.4 beyond a word count, on a 3-node VDL cluster, as a Kafka Streams user runs
it: tests/support/java/StreamsTopologiesApp.java, exactly_once_v2, with a windowed count
suppressed until its windows close, a KTable-KTable foreign-key join and a stream-table join
into an aggregation, run as two instances with a standby replica each (num.standby.replicas=1).

Every output record is asserted, read_committed: each appears once, across a kill -9 of the
instance that held the queried store (the other takes its tasks over, its standby state
answering interactive queries before and after). The internal topics Streams creates are
described back with the configs it asked for and behave as in Kafka: the repartition and
subscription topics are purged by DeleteRecords, the changelogs kept. Kafka's application reset
tool (StreamsResetter) deletes the internal topics and rewinds the inputs, and the application
then computes its aggregations again exactly (its joins meet the customers' latest names)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.java_client import kafka_tool
from tests.support.kafka import stream_set_configs
from tests.support.kafka_streams import CommittedReader, StreamsApp
from tests.support.waiting import wait_until
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

# A new group rebalances at once rather than waiting 3 s for more members (an instance joining
# later is one more rebalance).
CLUSTER_SETTINGS = {"group_initial_rebalance_delay_ms": 0}

APP = "shop"
INPUTS = ("clicks", "customers", "orders", "payments")
OUTPUTS = ("page-views", "order-details", "enriched-payments", "payment-totals")
T0 = 1_700_000_000_000  # the clicks' event times (ms): 10 s windows start at T0, T0 + 10 s, ...

REPARTITION = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
               "message.timestamp.type": "CreateTime"}
COMPACT = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}
# Every internal topic of the app and the configs Streams created it with (a window store's
# changelog keeps windows for their size + grace + windowstore.changelog.additional.retention.ms).
INTERNAL_TOPICS = {
    f"{APP}-pages-repartition": REPARTITION,
    f"{APP}-payments-by-customer-repartition": REPARTITION,
    f"{APP}-order-customer-subscription-registration-topic": REPARTITION,
    f"{APP}-order-customer-subscription-response-topic": REPARTITION,
    f"{APP}-page-views-changelog": {"cleanup.policy": "compact,delete", "retention.ms": str(10_000 + 86_400_000),
                                    "message.timestamp.type": "CreateTime"},
    f"{APP}-final-store-changelog": COMPACT,
    f"{APP}-customers-store-changelog": COMPACT,
    f"{APP}-orders-STATE-STORE-0000000011-changelog": COMPACT,
    f"{APP}-order-customer-subscription-store-changelog": COMPACT,
    f"{APP}-payment-totals-changelog": COMPACT,
}
PURGED = [name for name, configs in INTERNAL_TOPICS.items() if configs is REPARTITION]

Records = dict[str, list[tuple[str, str | None]]]


def produce(cluster: DevCluster, stream: str, records: list[tuple[str, str, int | None]]) -> None:
    """(key, value, timestamp or None for now) records, acks=all, in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    errors: list[object] = []
    for key, value, timestamp in records:
        producer.produce(stream, key=key.encode(), value=value.encode(), timestamp=timestamp or 0,
                         on_delivery=lambda e, _: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors, errors[:3]


def watermarks(cluster: DevCluster, stream: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(stream, 0), timeout=10, cached=False)
        return int(low), int(high)
    finally:
        consumer.close()


def app_topics(cluster: DevCluster) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return {name for name in admin.list_topics(timeout=30).topics if name.startswith(f"{APP}-")}


def instance(cluster: DevCluster, tmp_path: Path, name: str) -> StreamsApp:
    return StreamsApp("StreamsTopologiesApp", [cluster.bootstrap_servers, APP, str(tmp_path / f"state-{name}"), name,
                                               "1"], tmp_path / f"{name}.log")


def read_exactly(reader: CommittedReader, expected: Records) -> None:
    """Until every output holds as many records as expected, then exactly those."""
    reader.read_until(lambda seen: all(len(seen[stream]) >= len(records) for stream, records in expected.items()))
    assert reader.seen == expected


@pytest.fixture
def reader(cluster: DevCluster) -> Iterator[CommittedReader]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, 1, 3) for name in INPUTS + OUTPUTS]).values():
        future.result(timeout=30)
    committed = CommittedReader(cluster.bootstrap_servers, OUTPUTS)
    yield committed
    committed.close()


def first_inputs(cluster: DevCluster, apps: list[StreamsApp]) -> Records:
    """The first inputs, and the outputs they make."""
    # The customers first, in both joins' stores before any order or payment meets them (an
    # inner join drops a payment whose customer it does not know yet).
    produce(cluster, "customers", [("c1", "alice", None), ("c2", "bob", None)])
    wait_until(lambda: any(app.query("STALE customers-store c2") == "bob" for app in apps), 30,
               "the customers in the customers store")
    produce(cluster, "orders", [("o1", "c1,10", None), ("o2", "c2,20", None), ("o3", "c1,30", None)])
    produce(cluster, "payments", [("p1", "c1,5", None), ("p2", "c2,7", None), ("p3", "c1,11", None)])
    produce(cluster, "clicks", [("u1", "home", T0 + 1000), ("u2", "home", T0 + 2000), ("u1", "cart", T0 + 3000),
                                ("u3", "home", T0 + 12_000), ("u1", "cart", T0 + 15_000), ("u2", "home", T0 + 25_000)])
    # A window's final count comes once stream time passes its end: T0 + 25 s closes the first two.
    return {"page-views": [("cart", f"{T0}:1"), ("home", f"{T0}:2"), ("cart", f"{T0 + 10_000}:1"),
                           ("home", f"{T0 + 10_000}:1")],
            "order-details": [("o1", "alice:10"), ("o2", "bob:20"), ("o3", "alice:30")],
            "enriched-payments": [("c1", "alice:5"), ("c2", "bob:7"), ("c1", "alice:11")],
            "payment-totals": [("c1", "5"), ("c2", "7"), ("c1", "16")]}


def test_topologies_exactly_once_a_standby_taking_over_and_a_reset(cluster: DevCluster, reader: CommittedReader,
                                                                   tmp_path: Path) -> None:
    apps = [instance(cluster, tmp_path, "a"), instance(cluster, tmp_path, "b")]
    try:
        for app in apps:
            app.wait_running()
        expected = first_inputs(cluster, apps)
        read_exactly(reader, expected)

        bootstrap = cluster.bootstrap_servers
        assert app_topics(cluster) == set(INTERNAL_TOPICS)
        assert {name: stream_set_configs(bootstrap, name) for name in INTERNAL_TOPICS} == INTERNAL_TOPICS
        # Streams deletes (DeleteRecords) the repartition records its tasks committed past ...
        wait_until(lambda: all(low == high > 0 for low, high in map(lambda s: watermarks(cluster, s), PURGED)), 30,
                   lambda: f"Streams purging its repartition topics: { {s: watermarks(cluster, s) for s in PURGED} }")
        # ... and keeps the changelogs whole.
        assert watermarks(cluster, f"{APP}-payment-totals-changelog")[0] == 0

        # Interactive queries: the instance holding the store's task answers, the other's
        # standby replica has the same state (the metadata is there once the last rebalance is over).
        active, standbys = apps[0].query("ACTIVE payment-totals c1", until=lambda answer: "HostInfo" in answer
                                         ).split(" ", 1)
        assert active in ("a:1", "b:1") and standbys == f"[HostInfo{{host='{'b' if active == 'a:1' else 'a'}', port=1}}]"
        victim, survivor = (apps[0], apps[1]) if active == "a:1" else (apps[1], apps[0])
        assert victim.query("GET payment-totals c1") == "16"
        survivor.query("STALE payment-totals c1", until=lambda answer: answer == "16")
        assert survivor.query("GET payment-totals c1").startswith("UNAVAILABLE")

        # kill -9 the instance with the store; the survivor takes every task over (its standby
        # state restored) and goes on, each output once.
        victim.kill()
        produce(cluster, "customers", [("c2", "bobby", None)])
        produce(cluster, "payments", [("p4", "c1,100", None)])
        produce(cluster, "clicks", [("u4", "cart", T0 + 31_000)])
        survivor.query("GET payment-totals c1", until=lambda answer: answer == "116", timeout=60)
        expected["page-views"].append(("home", f"{T0 + 20_000}:1"))
        expected["order-details"].append(("o2", "bobby:20"))
        expected["enriched-payments"].append(("c1", "alice:100"))
        expected["payment-totals"].append(("c1", "116"))
        read_exactly(reader, expected)
    finally:
        for app in apps:
            app.close()
    assert survivor.process.returncode == 0, survivor.log_tail()

    # Kafka's reset tool: the internal topics deleted, the inputs rewound to offset 0, and a new
    # run computes the outputs again.
    reset = kafka_tool("kafka-streams-application-reset", "--bootstrap-server", cluster.bootstrap_servers,
                       "--application-id", APP, "--input-topics", ",".join(INPUTS))
    assert reset.returncode == 0, reset.stderr
    assert "Topic: clicks Partition: 0 Offset: 0" in reset.stdout
    assert app_topics(cluster) == set()
    # The whole input is read again: the aggregations give the same outputs once more. The joins
    # meet the customers' latest names where a first run met older ones: a rerun processes each
    # task's streams in timestamp order only as far as their records are there together, and the
    # orders and payments come back through topics the rerun writes anew (as in Kafka).
    again = instance(cluster, tmp_path, "c")
    try:
        again.wait_running()
        first = {stream: len(records) for stream, records in expected.items()}
        latest_orders = {"o1": "alice:10", "o2": "bobby:20", "o3": "alice:30"}

        def rerun() -> Records:
            return {stream: records[first[stream]:] for stream, records in reader.seen.items()}
        reader.read_until(lambda seen: all(len(seen[stream]) >= 2 * count for stream, count in first.items()
                                           if stream != "order-details")
                          and dict(rerun()["order-details"]) == latest_orders)
        assert rerun()["page-views"] == expected["page-views"]
        assert rerun()["payment-totals"] == expected["payment-totals"]
        assert rerun()["order-details"] in ([("o1", "alice:10"), ("o2", "bobby:20"), ("o3", "alice:30")],
                                            expected["order-details"])
        assert rerun()["enriched-payments"] in (expected["enriched-payments"], [
            ("c1", "alice:5"), ("c2", "bobby:7"), ("c1", "alice:11"), ("c1", "alice:100")])
        assert app_topics(cluster) == set(INTERNAL_TOPICS)
    finally:
        again.close()
    assert again.process.returncode == 0, again.log_tail()
