"""The node setting max_streams_per_node: CreateTopics that would place one more replica on a
node at the limit is refused with POLICY_VIOLATION and a message naming the setting; streams
created before stay, deleting one makes room again, and a bad value stops the start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import BrokerProcess
from tests.support.kafka import create_topic_raw, delete_topic_raw, raw_request
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


def create_many(address: str, names: list[str]) -> list[tuple[str, int, str | None]]:
    topics = [m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=-1)
              for name in names]
    response = raw_request(address, m.CreateTopicsRequest(topics=topics, timeout_ms=30_000), timeout=35.0)
    return [(t.name, int(t.error_code), t.error_message) for t in response.topics]


def test_creates_beyond_the_limit_are_refused_by_name(broker_factory) -> None:  # noqa: ANN001
    broker: BrokerProcess = broker_factory(max_streams_per_node=3)
    address = broker.bootstrap
    assert create_topic_raw(address, "first")[0] == ErrorCode.NONE
    # One request with four more: two fit, the other two are refused, in the request's order.
    results = create_many(address, ["second", "third", "fourth", "fifth"])
    assert [(name, code) for name, code, _ in results] == [
        ("second", ErrorCode.NONE), ("third", ErrorCode.NONE),
        ("fourth", ErrorCode.POLICY_VIOLATION), ("fifth", ErrorCode.POLICY_VIOLATION)]
    message = results[2][2]
    assert message is not None and "max_streams_per_node" in message and "3" in message
    # validate_only is refused alike, and nothing refused was created.
    topic = m.CreateTopicsRequest.CreatableTopic(name="sixth", num_partitions=1, replication_factor=-1)
    response = raw_request(address, m.CreateTopicsRequest(topics=[topic], timeout_ms=30_000, validate_only=True))
    assert response.topics[0].error_code == ErrorCode.POLICY_VIOLATION
    listed = raw_request(address, m.MetadataRequest(topics=None))
    assert sorted(t.name for t in listed.topics) == ["first", "second", "third"]
    # Deleting a stream makes room for one more.
    assert delete_topic_raw(address, "second") == ErrorCode.NONE
    assert create_topic_raw(address, "fourth")[0] == ErrorCode.NONE
    assert create_topic_raw(address, "fifth")[0] == ErrorCode.POLICY_VIOLATION


def test_a_bad_limit_stops_the_start_naming_the_setting(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "vdl_broker.server.main", "--data-dir", str(tmp_path),
                             "--listen", "127.0.0.1:0", "--max-streams-per-node", "0"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "max_streams_per_node" in result.stderr + result.stdout
