"""Transactions (KIP-98, KIP-890's rules) against a real broker: the coordinator's APIs over the
wire. (Markers and read_committed come with the stream side.)"""

from __future__ import annotations

from typing import Any

from tests.support.cluster import BrokerProcess
from tests.support.kafka import BrokerClient, client
from tests.support.waiting import wait_until
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

TIMEOUT_MS = 60_000


def init(c: BrokerClient, txn: str, expected: tuple[int, int] = (-1, -1), version: int = 4) -> Any:
    return c.request(m.InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=TIMEOUT_MS,
                                             producer_id=expected[0], producer_epoch=expected[1]), version)


def add(c: BrokerClient, txn: str, pid: int, epoch: int, streams: list[str], version: int = 3) -> list[int]:
    topics = [m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=s, partitions=[0]) for s in streams]
    response = c.request(m.AddPartitionsToTxnRequest(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                                     v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics),
                         version)
    return [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]


def end(c: BrokerClient, txn: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return c.request(m.EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit),
                     version).error_code


def test_a_new_instance_fences_the_zombie_for_good(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-zombie")
        old = init(c, "zombie")
        assert (old.error_code, old.producer_epoch) == (0, 0)
        new = init(c, "zombie")
        assert (new.error_code, new.producer_id, new.producer_epoch) == (0, old.producer_id, 1)
        # The old instance retrying its own bump (KIP-360) cannot take the epoch back.
        retried = init(c, "zombie", (old.producer_id, 0))
        assert retried.error_code == ErrorCode.PRODUCER_FENCED
        assert init(c, "zombie", (old.producer_id, 0), version=3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert add(c, "zombie", old.producer_id, 0, ["tx-zombie"]) == [ErrorCode.PRODUCER_FENCED]
        assert add(c, "zombie", old.producer_id, 0, ["tx-zombie"], version=1) == [ErrorCode.INVALID_PRODUCER_EPOCH]
        # The new instance's own bump is retriable.
        bumped = init(c, "zombie", (new.producer_id, 1))
        assert (bumped.error_code, bumped.producer_epoch) == (0, 2)
        assert init(c, "zombie", (new.producer_id, 1)).producer_epoch == 2


def test_commit_abort_and_an_ongoing_transaction_fenced(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-a")
        first = init(c, "ctp")
        pid = first.producer_id
        assert end(c, "ctp", pid, 0, True) == ErrorCode.INVALID_TXN_STATE  # nothing to commit
        assert add(c, "ctp", pid, 0, ["tx-a", "tx-missing"]) == [ErrorCode.OPERATION_NOT_ATTEMPTED,
                                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert add(c, "ctp", pid, 0, ["tx-a"]) == [0]
        assert end(c, "ctp", pid, 0, True) == 0
        assert end(c, "ctp", pid, 0, True) == 0  # a retry of a commit done
        assert end(c, "ctp", pid, 0, False) == ErrorCode.INVALID_TXN_STATE
        assert add(c, "ctp", pid, 0, ["tx-a"]) == [0]
        assert end(c, "ctp", pid, 0, False) == 0
        # An ongoing transaction of the old instance is aborted when a new one starts.
        assert add(c, "ctp", pid, 0, ["tx-a"]) == [0]
        assert init(c, "ctp").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        assert end(c, "ctp", pid, 0, True) == ErrorCode.PRODUCER_FENCED
        # The coordinator completes the abort by itself; then the new instance gets its epoch.
        new = wait_until(lambda: (r := init(c, "ctp")).error_code != ErrorCode.CONCURRENT_TRANSACTIONS and r,
                         message="the fencing abort completes")
        assert (new.error_code, new.producer_id, new.producer_epoch) == (0, pid, 2)


def test_offsets_in_a_transaction_reach_the_group_on_commit(module_broker: BrokerProcess) -> None:
    with client(module_broker.bootstrap) as c:
        c.create_stream("tx-in")
        pid = init(c, "offsets").producer_id
        added = c.request(m.AddOffsetsToTxnRequest(transactional_id="offsets", producer_id=pid, producer_epoch=0,
                                                   group_id="tx-group"), 3)
        assert added.error_code == 0
        partition = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                                              committed_metadata="m")
        committed = c.request(m.TxnOffsetCommitRequest(
            transactional_id="offsets", group_id="tx-group", producer_id=pid, producer_epoch=0,
            topics=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="tx-in", partitions=[partition])]), 3)
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
        assert fetched_offset(c, "tx-group", "tx-in") == -1
        assert end(c, "offsets", pid, 0, True) == 0
        assert fetched_offset(c, "tx-group", "tx-in") == 42


def fetched_offset(c: BrokerClient, group: str, stream: str) -> int:
    response = c.request(m.OffsetFetchRequest(group_id=group, topics=[
        m.OffsetFetchRequest.OffsetFetchRequestTopic(name=stream, partition_indexes=[0])]), 5)
    return response.topics[0].partitions[0].committed_offset
