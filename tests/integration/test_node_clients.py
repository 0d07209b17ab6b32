"""kafkajs 2.2.4 (with kafkajs-snappy 1.1.0) against VDL, one Node program
(tests/support/node/driver.js, installed by `make install`) run once per scenario
(tests/support/polyglot.py):

- an idempotent acks=all producer per codec kafkajs has without native add-ons (none, gzip,
  snappy), read back exactly (offsets, keys, values, headers, timestamps), over PLAINTEXT and
  SASL_SSL (SCRAM-SHA-512), on one node (SASL_SSL) and three (PLAINTEXT);
- a consumer group (kafkajs speaks the classic protocol only): resume from a commit, two members
  with disjoint assignments, a rebalance when one leaves, the group described and its offsets fetched;
- the admin client: create (twice), describe configs, offsets (start, end, by time), an unknown
  group described and its offsets fetched, delete (twice);
- transactions: commit, abort, read_committed against read_uncommitted, and a
  consume-transform-produce copy with its offsets sent in each transaction;
- the stream leader killed -9 on three nodes while the producer runs: every record once, in order.

Clusters come from tests/integration/conftest.py (`java_targets`), shared by the whole module.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.java_targets import JavaTarget
from tests.support.polyglot import KAFKAJS, expected_record, run_killing_the_leader, run_scenario, target_args

pytestmark = pytest.mark.timeout(300)

CODECS = ("none", "gzip", "snappy")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafkajs(scenario: str, target: JavaTarget, **args: Any) -> Any:
    return run_scenario(KAFKAJS, scenario, target_args(target, **args))


@pytest.mark.parametrize("target_name", ["1-node-sasl-ssl", "3-nodes-plain"])
def test_produce_every_codec_read_back_exactly(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    target = java_targets[target_name]
    topics = [unique(f"kafkajs-{codec}") for codec in CODECS]
    got = kafkajs("produce", target, topics=topics, codecs=list(CODECS), count=60)
    assert got["acked"] == {codec: [0, 30] for codec in CODECS}
    assert got["records"] == {codec: [expected_record(topic, i) for i in range(60)]
                              for codec, topic in zip(CODECS, topics, strict=True)}


@pytest.mark.parametrize("target_name", ["1-node-plain", "3-nodes-sasl-ssl"])
def test_group_resumes_shares_and_rebalances(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    target = java_targets[target_name]
    for attempt in range(5):
        topics = sorted(unique(f"kafkajs-group-{i}") for i in range(4))
        try:
            got = kafkajs("groups", target, topics=topics, group=unique("kafkajs-group"), count=10)
            break
        except AssertionError as error:
            # A defect of kafkajs itself, named by the driver (tests/support/node/driver.js):
            # that attempt shows nothing about the broker; a new group on new streams runs again.
            if "tulios/kafkajs#1366" not in str(error) or attempt == 4:
                raise
    assert got["first_read"] == {t: list(range(10)) for t in topics}
    # Two members resume at the commit (10), each with two streams, together every stream once;
    # the four records more of each stream go to its member only.
    assert got["early"] == [[], []]
    assigned = got["two_assigned"]
    assert sorted(assigned[0] + assigned[1]) == topics and [len(a) for a in assigned] == [2, 2]
    assert got["two_read"] == [{t: [10, 11, 12, 13] for t in assigned[m]} for m in (0, 1)]
    assert got["described"] == {"state": "Stable", "members": 2, "protocol_type": "consumer",
                                "protocol": "RoundRobinAssigner"}
    # One leaves: the other takes every stream and reads the one record more of each.
    assert got["last_read"] == {t: [14] for t in topics}
    assert got["committed"] == {t: 15 for t in topics}


def test_admin(java_targets: dict[str, JavaTarget]) -> None:
    target = java_targets["3-nodes-plain"]
    topics = [unique("kafkajs-admin"), unique("kafkajs-admin")]
    got = kafkajs("admin", target, topics=topics, group=unique("kafkajs-admin-group"))
    assert got == {
        "created": True,
        "created_again": False,  # kafkajs answers false to TOPIC_ALREADY_EXISTS
        "configs": {"retention.ms": "86400000/set", "segment.ms": "604800000/default",
                    "max.message.bytes": "16777216/default"},
        "describe_error": 0,
        # Timestamps base + i*1000 (i = 0..4): the first at or after base+2000 is offset 2; past
        # the last, the end (kafkajs asks with ListOffsets and keeps -1 as the end offset).
        "offsets": {"start": 0, "end": 5, "after_third": 2, "after_all": 5},
        "group": {"state": "Dead", "members": 0, "error": 0, "committed": -1},
        "deleted": "OK",
        "deleted_again": "UNKNOWN_TOPIC_OR_PARTITION",
        "remaining": [],
    }


@pytest.mark.parametrize("target_name", ["1-node-plain", "3-nodes-sasl-ssl"])
def test_transactions(java_targets: dict[str, JavaTarget], target_name: str) -> None:
    target = java_targets[target_name]
    source, copy = unique("kafkajs-txn"), unique("kafkajs-txn-copy")
    got = kafkajs("transactions", target, topics=[source, copy], group=unique("kafkajs-txn-group"),
                  txn_id=unique("kafkajs-txn"))
    # Offsets: 0-2 committed, 3 its marker, 4-5 aborted, 6 the abort marker, 7 committed, 8 a marker.
    committed = [expected_record(source, i) for i in range(3)] + [expected_record(source, 5, offset=7)]
    assert got["read_committed"] == committed
    assert got["read_uncommitted"] == [expected_record(source, i, offset=o)
                                       for i, o in enumerate([0, 1, 2, 4, 5, 7])]
    assert [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in got["copied"]] == [
        (r["key"], "copy-" + r["value"], r["headers"], r["timestamp"]) for r in committed]
    assert got["group_offsets"] == {source: 8}


def test_kill_stream_leader_loses_nothing(java_targets: dict[str, JavaTarget]) -> None:
    topic = unique("kafkajs-kill")
    now = int(time.time() * 1000)
    got = run_killing_the_leader(KAFKAJS, "kill-leader", java_targets["3-nodes-plain"], topic, base_millis=now)
    assert got["records"] == [expected_record(topic, i, base=now) for i in range(200)]
