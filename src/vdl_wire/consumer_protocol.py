"""The consumer protocol's embedded messages, which clients put inside JoinGroup/SyncGroup as
opaque bytes (protocol type "consumer"): the topics a member subscribes to and the topics its
assignment gives it. Only what the broker and the tools read; the rest is ignored.

# message defs: ConsumerProtocolSubscription.json, ConsumerProtocolAssignment.json (an int16
# version, then an array of topic names / of (topic name, [int32 partition]); both keep this
# prefix in every version)
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, pos)
    pos += 2
    if length < 0 or pos + length > len(data):
        raise ValueError("bad string")
    return data[pos:pos + length].decode(), pos + length


def subscribed_topics(protocol_type: str | None, metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription; None when it cannot be read."""
    if protocol_type != "consumer" or len(metadata) < 6:
        return None
    try:
        (count,) = _INT32.unpack_from(metadata, 2)
        pos, topics = 6, set()
        for _ in range(max(count, 0)):
            topic, pos = _string(metadata, pos)
            topics.add(topic)
        return topics
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def assigned_topics(protocol_type: str | None, assignment: bytes) -> dict[str, list[int]] | None:
    """topic -> partitions of a ConsumerProtocolAssignment; None when it cannot be read."""
    if protocol_type != "consumer" or len(assignment) < 6:
        return None
    try:
        (count,) = _INT32.unpack_from(assignment, 2)
        pos, topics = 6, {}
        for _ in range(max(count, 0)):
            topic, pos = _string(assignment, pos)
            (partitions,) = _INT32.unpack_from(assignment, pos)
            pos += 4
            indexes = [_INT32.unpack_from(assignment, pos + 4 * i)[0] for i in range(max(partitions, 0))]
            pos += 4 * max(partitions, 0)
            topics[topic] = indexes
        return topics
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
