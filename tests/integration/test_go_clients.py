"""franz-go (github.com/twmb/franz-go: kgo 1.22.3, kadm 1.20.0), IBM/sarama 1.61.1 and segmentio/kafka-go 0.4.51 against
VDL, one Go program (tests/support/go, built by `make install`) run once per scenario
(tests/support/polyglot.py). franz-go:

- an idempotent acks=all producer per codec (none, gzip, snappy, lz4, zstd), read back exactly
  (offsets, keys, values, headers, timestamps), over PLAINTEXT and SASL_SSL (SCRAM-SHA-512), on one
  node and three;
- consumer groups, classic (cooperative-sticky) and KIP-848: resume from a commit, two members with
  disjoint assignments, a rebalance when one leaves, the group described and its offsets fetched;
- kadm: create (twice), describe configs, list offsets (start, end, by time), describe a group,
  lag, delete (twice);
- transactions: commit, abort, read_committed against read_uncommitted, and a
  GroupTransactSession copying a stream with the group's offsets in its transactions;
- the stream leader killed -9 on three nodes while the producer runs: every record once, in order;
- a KIP-848 regex subscription (SubscribedTopicRegex) taking a stream created later.

Sarama (PLAINTEXT; its own SCRAM needs a third-party module), with the protocol versions of its
default Kafka release (2.8) and of old ones (0.11, 1.0: Produce v3, Fetch v5-6, JoinGroup v1-2,
DescribeConfigs v0...): every codec, a group of two with round robin, admin, transactions, and
the leader kill.

Clusters come from tests/integration/conftest.py (`java_targets`: one node and three, both
listeners), shared by the whole module.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.java_targets import JavaTarget
from tests.support.polyglot import FRANZ, expected_record, run_killing_the_leader, run_scenario, target_args

pytestmark = pytest.mark.timeout(300)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
FRANZ_PROGRAM = (str(FRANZ),)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def franz(scenario: str, target: JavaTarget, **args: Any) -> Any:
    return run_scenario(FRANZ_PROGRAM, scenario, target_args(target, **args))


def test_produce_every_codec_read_back_exactly(target: JavaTarget) -> None:
    topics = [unique(f"franz-{codec}") for codec in CODECS]
    got = franz("produce", target, topics=topics, codecs=list(CODECS), count=60)
    assert got["acked"] == {codec: list(range(60)) for codec in CODECS}
    assert got["records"] == {codec: [expected_record(topic, i) for i in range(60)]
                              for codec, topic in zip(CODECS, topics, strict=True)}


@pytest.mark.parametrize("target_name", ["1-node-plain", "3-nodes-sasl-ssl"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_groups_resume_share_and_rebalance(java_targets: dict[str, JavaTarget], target_name: str,
                                           protocol: str) -> None:
    target = java_targets[target_name]
    topics = sorted(unique(f"franz-group-{i}") for i in range(4))
    group = unique("franz-group")
    got = franz("groups", target, topics=topics, group=group, count=10, protocol=protocol)
    assert got["first_read"] == {t: list(range(10)) for t in topics}
    # Two members resume at the commit (10), each with two streams, together every stream once;
    # the four records more of each stream go to its member only.
    assert got["early"] == [[], []]
    assigned = got["two_assigned"]
    assert sorted(assigned[0] + assigned[1]) == topics and [len(a) for a in assigned] == [2, 2]
    assert got["two_read"] == [{t: [10, 11, 12, 13] for t in assigned[m]} for m in (0, 1)]
    assert got["described"] == {"state": "Stable", "members": 2, "protocol_type": "consumer"}
    # One leaves: the other takes every stream and reads the one record more of each.
    assert got["last_read"] == {t: [14] for t in topics}
    assert got["committed"] == {t: 15 for t in topics}


def test_admin(java_targets: dict[str, JavaTarget]) -> None:
    target = java_targets["3-nodes-plain"]
    topics = [unique("franz-admin"), unique("franz-admin")]
    got = franz("admin", target, topics=topics, group=unique("franz-admin-group"))
    assert got == {
        "created": {t: "OK" for t in topics},
        "created_again": {topics[0]: "TOPIC_ALREADY_EXISTS"},
        "configs": {"retention.ms": "86400000/DYNAMIC_TOPIC_CONFIG", "segment.ms": "604800000/DEFAULT_CONFIG",
                    "max.message.bytes": "16777216/DEFAULT_CONFIG"},
        # Timestamps base + i*1000 (i = 0..4): the first at or after base+2000 is offset 2.
        "offsets": {"start": 0, "end": 5, "after_third": 2, "after_all": 5},
        "group": {"state": "Empty", "members": 0, "lag": {topics[0]: 2}},
        "deleted": {t: "OK" for t in topics},
        "deleted_again": {topics[0]: "UNKNOWN_TOPIC_OR_PARTITION"},
        "remaining": [],
    }


@pytest.mark.parametrize("target_name", ["1-node-plain", "3-nodes-sasl-ssl"])
def test_transactions(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    target = java_targets[target_name]
    source, copy = unique("franz-txn"), unique("franz-txn-copy")
    got = franz("transactions", target, topics=[source, copy], group=unique("franz-txn-group"),
                txn_id=unique("franz-txn"))
    # Offsets: 0-2 committed, 3 its marker, 4-5 aborted, 6 the abort marker, 7 committed, 8 a marker.
    committed = [expected_record(source, i) for i in range(3)] + [expected_record(source, 5, offset=7)]
    assert got["read_committed"] == committed
    assert got["read_uncommitted"] == [expected_record(source, i, offset=o)
                                       for i, o in enumerate([0, 1, 2, 4, 5, 7])]
    # The copy: one transaction per poll, each with its offsets; a marker after each.
    copied = got["copied"]
    assert [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in copied] == [
        (r["key"], "copy-" + r["value"], r["headers"], r["timestamp"]) for r in committed]
    # franz-go commits the offset after the last record it read (7), not past the marker at 8.
    assert got["group_offsets"] == {source: 8}


def test_kill_stream_leader_loses_nothing(java_targets: dict[str, JavaTarget]) -> None:
    topic = unique("franz-kill")
    now = int(time.time() * 1000)
    # franz-go times a record out from its timestamp: these are now's, so retries have time.
    created = run_killing_the_leader(FRANZ_PROGRAM, "kill-leader", java_targets["3-nodes-plain"], topic,
                                     base_millis=now)
    assert created["records"] == [expected_record(topic, i, base=now) for i in range(200)]


SARAMA_CODECS = {"": CODECS, "4.0.0": CODECS, "1.0.0": CODECS[:-1], "0.11.0.0": CODECS[:-1]}  # zstd: Kafka 2.1+


@pytest.mark.parametrize(("target_name", "version"), [("3-nodes-plain", ""), ("1-node-plain", "4.0.0"),
                                                      ("1-node-plain", "1.0.0"), ("3-nodes-plain", "0.11.0.0")])
def test_sarama_produce_every_codec(java_targets: dict[str, JavaTarget], target_name: str, version: str) -> None:
    target = java_targets[target_name]
    codecs = SARAMA_CODECS[version]
    topics = [unique(f"sarama-{codec}") for codec in codecs]
    got = franz("sarama-produce", target, topics=topics, codecs=list(codecs), count=30, sarama_version=version)
    assert got["acked"] == {codec: list(range(30)) for codec in codecs}
    assert got["records"] == {codec: [expected_record(topic, i) for i in range(30)]
                              for codec, topic in zip(codecs, topics, strict=True)}


@pytest.mark.parametrize(("target_name", "version"), [("3-nodes-plain", ""), ("1-node-plain", "0.11.0.0")])
def test_sarama_group_resumes_shares_and_rebalances(java_targets: dict[str, JavaTarget], target_name: str,
                                                    version: str) -> None:
    target = java_targets[target_name]
    topics = sorted(unique(f"sarama-group-{i}") for i in range(4))
    got = franz("sarama-groups", target, topics=topics, group=unique("sarama-group"), count=10, sarama_version=version)
    assert got["first_read"] == {t: list(range(10)) for t in topics}
    assert got["early"] == [[], []]
    assigned = got["two_assigned"]
    assert sorted(assigned[0] + assigned[1]) == topics and [len(a) for a in assigned] == [2, 2]
    assert got["two_read"] == [{t: [10, 11, 12, 13] for t in assigned[m]} for m in (0, 1)]
    assert got["described"] == {"state": "Stable", "members": 2, "protocol_type": "consumer", "protocol": "roundrobin"}
    assert got["last_read"] == {t: [14] for t in topics}
    assert got["committed"] == {t: 15 for t in topics}


@pytest.mark.parametrize("version", ["", "0.11.0.0"])
def test_sarama_admin(java_targets: dict[str, JavaTarget], version: str) -> None:
    topic = unique("sarama-admin")
    got = franz("sarama-admin", java_targets["3-nodes-plain"], topics=[topic], group=unique("sarama-admin"),
                sarama_version=version)
    assert got == {
        "created": "OK",
        "created_again": "kafka server: Topic with this name already exists",
        "created_bad_partitions": "kafka server: Number of partitions is invalid",
        # DescribeConfigs v0 has no config source: sarama says Unknown for what is not a default.
        "configs": {"retention.ms": "86400000/" + ("Unknown" if version else "Topic"), "segment.ms": "604800000/Default"},
        "group_offset": -1,
        "deleted": "OK",
        "deleted_again": "kafka server: Request was for a topic or partition that does not exist on this broker",
    }


@pytest.mark.parametrize(("target_name", "version"), [("3-nodes-plain", ""), ("1-node-plain", "0.11.0.0")])
def test_sarama_transactions(java_targets: dict[str, JavaTarget], target_name: str, version: str) -> None:
    topic = unique("sarama-txn")
    got = franz("sarama-transactions", java_targets[target_name], topics=[topic], txn_id=unique("sarama-txn"),
                sarama_version=version)
    assert got["read_committed"] == [expected_record(topic, i) for i in range(3)] + [
        expected_record(topic, 5, offset=7)]
    assert got["read_uncommitted"] == [expected_record(topic, i, offset=o) for i, o in enumerate([0, 1, 2, 4, 5, 7])]


def test_sarama_kill_stream_leader_loses_nothing(java_targets: dict[str, JavaTarget]) -> None:
    topic = unique("sarama-kill")
    got = run_killing_the_leader(FRANZ_PROGRAM, "sarama-kill-leader", java_targets["3-nodes-plain"], topic)
    assert got["records"] == [expected_record(topic, i) for i in range(200)]


def test_kip848_regex_subscription_follows_new_streams(java_targets: dict[str, JavaTarget]) -> None:
    """kgo.ConsumeRegex with KIP-848's protocol (`ServerSideBalancer`) sends SubscribedTopicRegex:
    the coordinator resolves it, again when a matching stream is created (VDL refused it with
    INVALID_REQUEST before). (With the classic protocol the client matches names itself.)"""
    target = java_targets["1-node-plain"]
    prefix = unique("franz-rx")
    topics = [f"{prefix}-a", f"{prefix}-b", unique("franz-other"), f"{prefix}-c"]
    got = franz("regex", target, topics=topics, regex=f"{prefix}-.*", group=unique("franz-rx"), protocol="consumer")
    assert got == {"first": {topics[0]: [0], topics[1]: [0]}, "first_assigned": topics[:2],
                   "then": {topics[3]: [0]}, "then_assigned": [topics[0], topics[1], topics[3]]}


@pytest.mark.parametrize("target_name", ["1-node-plain", "3-nodes-plain"])
def test_kafka_go_writer_client_fetch_and_group_reader(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    """segmentio/kafka-go: its Client's Fetch is sessionless with session id -1 (VDL answered it
    FETCH_SESSION_ID_NOT_FOUND and no topics, which kafka-go reports as "topic not found")."""
    topics = [unique(f"kafkago-{codec}") for codec in CODECS]
    group = unique("kafkago-group")
    got = franz("kafkago-produce", java_targets[target_name], topics=topics, codecs=list(CODECS), count=30, group=group)
    assert got["records"] == {codec: [expected_record(topic, i) for i in range(30)]
                              for codec, topic in zip(CODECS, topics, strict=True)}
    assert got["group"] == [expected_record(topics[0], i) for i in range(30)]
    assert got["committed"] == 30
