"""The consumer protocol's subscription and assignment, as kafka-python encodes them (its
hand-written classes are the peer), and what malformed or foreign bytes give: None."""

from __future__ import annotations

from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)

from vdl_wire.consumer_protocol import assigned_topics, subscribed_topics


def test_subscription_and_assignment_as_kafka_python_writes_them() -> None:
    metadata = ConsumerProtocolMemberMetadata_v0(0, ["orders", "payments"], b"user").encode()
    assert subscribed_topics("consumer", metadata) == {"orders", "payments"}
    assignment = ConsumerProtocolMemberAssignment_v0(0, [("orders", [0]), ("payments", [0, 3])], b"x").encode()
    assert assigned_topics("consumer", assignment) == {"orders": [0], "payments": [0, 3]}
    assert assigned_topics("consumer", ConsumerProtocolMemberAssignment_v0(0, [], b"").encode()) == {}


def test_other_protocols_and_broken_bytes_give_none() -> None:
    assignment = ConsumerProtocolMemberAssignment_v0(0, [("orders", [0])], b"").encode()
    assert assigned_topics("connect", assignment) is None
    assert assigned_topics("consumer", assignment[:-9]) is None  # cut inside the partition list
    assert assigned_topics("consumer", b"\x00") is None
    assert subscribed_topics("consumer", b"\x00\x00\x00\x00\x00\x01\x00\x09ab") is None  # name longer than the bytes
