"""Which replica a consumer should read from (KIP-392): the leader's answer to a Fetch v11+ that
names the consumer's rack (`client.rack`), as Kafka's RackAwareReplicaSelector gives it.

- No rack in the request, or no replica in that rack: the leader serves (no redirect).
- The leader is in the consumer's rack: the leader serves.
- Else the most caught-up in-sync follower of that rack (ties: the lowest node id), provided it
  holds the fetch offset: Kafka requires the follower's log end offset to reach it; here the
  follower must hold records up to it that the leader has applied, so once it learns the commit
  (the next heartbeat at most) it serves the consumer's offset without OFFSET_NOT_AVAILABLE.

The answer is a preferred_read_replica in an otherwise empty response: the client then fetches
from that node (librdkafka keeps it until an error or its lease runs out, then asks the leader
again).
"""

from __future__ import annotations

from collections.abc import Mapping

NO_PREFERENCE = -1  # Fetch response: preferred_read_replica when the leader itself serves


def preferred_read_replica(client_rack: str, fetch_offset: int, leader: int, racks: Mapping[int, str | None],
                           follower_offsets: Mapping[int, int]) -> int:
    """The node a consumer in `client_rack` should fetch `fetch_offset` from, or NO_PREFERENCE.

    `racks`: every node's rack; `follower_offsets`: in-sync follower -> the offset below which it
    can serve (Partition.follower_read_offsets)."""
    if not client_rack or racks.get(leader) == client_rack:
        return NO_PREFERENCE
    candidates = [(offset, -node) for node, offset in follower_offsets.items()
                  if racks.get(node) == client_rack and offset >= fetch_offset]
    if not candidates:
        return NO_PREFERENCE
    return -max(candidates)[1]


__all__ = ["NO_PREFERENCE", "preferred_read_replica"]
