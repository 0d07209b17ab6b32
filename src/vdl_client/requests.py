"""The requests the client sends for one stream (partition 0), built once here."""

from __future__ import annotations

from typing import Any

from vdl_wire.messages import FetchRequest, ProduceRequest

# Fetch v10 is served by the leader only; from v11 any in-sync replica serves it below its own
# high watermark (KIP-392), so reads meant for the leader are sent at v10.
LEADER_FETCH_VERSION = 10
REPLICA_FETCH_VERSION = 11


def fetch_request(stream: str, offset: int, partition_max_bytes: int, max_bytes: int, max_wait_ms: int,
                  isolation_level: int = 0) -> Any:
    """A Fetch for partition 0: isolation_level 0 READ_UNCOMMITTED (everything below the high
    watermark), 1 READ_COMMITTED (below the last stable offset, KIP-98)."""
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                        isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=stream, partitions=[
                                FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                            partition_max_bytes=partition_max_bytes)])],
                        forgotten_topics_data=[], rack_id="")


Batch = bytes | bytearray | memoryview  # one encoded RecordBatch


def produce_request(stream: str, batch: Batch, timeout_ms: int,
                    transactional_id: str | None = None, acks: int = -1) -> Any:
    """A Produce of one batch to partition 0 (acks=-1: answered once the batch is committed)."""
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=stream, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch if isinstance(batch, bytes) else memoryview(batch))])])
