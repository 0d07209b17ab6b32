"""rskafka 0.6 (Rust: its own protocol code, no librdkafka) against VDL, one Rust program
(tests/support/rust/src/main.rs, built by `make install`) run once per scenario
(tests/support/polyglot.py), on one node and on three, over PLAINTEXT:

- a producer per codec (none, gzip, snappy, lz4, zstd; acks=all, rskafka's only setting), read
  back exactly (offsets, keys, values, headers, timestamps);
- its admin calls: create (twice, and with two partitions: both refused with Kafka's errors),
  offsets at the start, the end and by time, DeleteRecords, delete, the stream gone from Metadata.

Clusters come from tests/integration/conftest.py (`java_targets`), shared by the whole module.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.java_targets import JavaTarget, unique
from tests.support.polyglot import RSKAFKA, expected_record, run_scenario, target_args

pytestmark = pytest.mark.timeout(300)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PLAIN_TARGETS = ("1-node-plain", "3-nodes-plain")


def rskafka(scenario: str, target: JavaTarget, **args: Any) -> Any:
    return run_scenario((str(RSKAFKA),), scenario, target_args(target, **args))


@pytest.mark.parametrize("target_name", PLAIN_TARGETS)
def test_produce_every_codec_read_back_exactly(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    topics = [unique(f"rskafka-{codec}") for codec in CODECS]
    got = rskafka("produce", java_targets[target_name], topics=topics, codecs=list(CODECS), count=30)
    assert got["acked"] == {codec: list(range(30)) for codec in CODECS}
    # rskafka keeps a record's headers in a map: they come back ordered by name.
    expected = {codec: [expected_record(topic, i) | {"headers": [["empty", ""], ["i", str(i)]]} for i in range(30)]
                for codec, topic in zip(CODECS, topics, strict=True)}
    assert got["records"] == expected


@pytest.mark.parametrize("target_name", PLAIN_TARGETS)
def test_admin(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    topic = unique("rskafka-admin")
    got = rskafka("admin", java_targets[target_name], topics=[topic])
    assert got == {
        "create_again": f'Server error TopicAlreadyExists with message "stream {topic} already exists", '
                        f'request: Topic("{topic}"), response: None, virtual: false',
        "two_partitions": 'Server error InvalidPartitions with message "a VDL log stream has exactly one '
                          f'partition", request: Topic("{topic}-two"), response: None, virtual: false',
        "earliest": 0, "latest": 10, "by_time": 5, "earliest_after_delete": 3,
        "offsets_after_delete": list(range(3, 10))}
