"""What a producer whose epoch was fenced (the coordinator's abort of its timed-out transaction
bumped it) gets from the handlers that are not the coordinator's state machine, as Kafka 4.4
answers (measured against Kafka 4.4.0): AddPartitionsToTxn with verify_only (a broker's KIP-890
part 1 check) as TransactionCoordinator.handleVerifyPartitionsInTransaction, and TxnOffsetCommit
INVALID_PRODUCER_EPOCH (Kafka's group coordinator verifies with the transaction coordinator and
answers its PRODUCER_FENCED as a write does)."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.cluster.transactions import NO_EPOCH, TransactionsState, TxnMeta, TxnResult, TxnState
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers import add_partitions_to_txn, txn_offset_commit
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AddPartitionsToTxnRequest, TxnOffsetCommitRequest

pytestmark = pytest.mark.unit

R = AddPartitionsToTxnRequest
ONGOING = TxnMeta("t", 7, 3, 2, TxnState.ONGOING, ("a",), 60_000, 1, 1, groups=("g",))
TIMED_OUT = dataclasses.replace(ONGOING, epoch=4, last_epoch=3, state=TxnState.COMPLETE_ABORT, streams=(), groups=())


def context(version: int) -> RequestContext:
    return RequestContext(SimpleNamespace(request_api_version=version), "127.0.0.1", None)  # type: ignore[arg-type]


def verify(meta: TxnMeta | None, producer_id: int, epoch: int) -> dict[str, int]:
    """The error per stream of a verify_only request (v4) for streams a and b."""
    node: Any = SimpleNamespace(
        authorizer=SimpleNamespace(allows=lambda *args: True),
        metadata=SimpleNamespace(state=SimpleNamespace(streams={"a": None, "b": None})),
        transactions=SimpleNamespace(active=lambda: True, state={"t": meta}.get if meta else {}.get))
    request = R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id="t", producer_id=producer_id, producer_epoch=epoch, verify_only=True,
        topics=[R.AddPartitionsToTxnTopic(name=name, partitions=[0]) for name in ("a", "b")])])
    response = asyncio.run(add_partitions_to_txn.handle(node, context(4), request))
    assert response.error_code == 0
    [result] = response.results_by_transaction
    return {topic.name: topic.results_by_partition[0].partition_error_code for topic in result.topic_results}


def test_verify_only_answers_as_kafkas_coordinator() -> None:
    assert verify(ONGOING, 7, 3) == {"a": ErrorCode.NONE, "b": ErrorCode.TRANSACTION_ABORTABLE}
    assert verify(TIMED_OUT, 7, 3) == dict.fromkeys("ab", ErrorCode.PRODUCER_FENCED)
    assert verify(TIMED_OUT, 7, 4) == dict.fromkeys("ab", ErrorCode.TRANSACTION_ABORTABLE)
    aborting = dataclasses.replace(TIMED_OUT, state=TxnState.PREPARE_ABORT, streams=("a",))
    assert verify(aborting, 7, 4) == dict.fromkeys("ab", ErrorCode.CONCURRENT_TRANSACTIONS)
    assert verify(ONGOING, 8, 3) == dict.fromkeys("ab", ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert verify(None, 7, 3) == dict.fromkeys("ab", ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    fresh = TxnMeta("t", 7, 0, NO_EPOCH, TxnState.EMPTY, (), 60_000, -1, 1)
    assert verify(fresh, 7, 0) == dict.fromkeys("ab", ErrorCode.TRANSACTION_ABORTABLE)


class Coordinator:
    """The coordinator's answers from the state machine itself (one transactional id)."""

    def __init__(self, meta: TxnMeta) -> None:
        self.txns = TransactionsState(txns={"t": meta})

    def active(self) -> bool:
        return True

    def state(self, txn: str) -> TxnMeta | None:
        return self.txns.get(txn)

    async def add_offsets(self, txn: str, producer_id: int, epoch: int, group: str) -> TxnResult:
        return self._apply({"op": "txn_add_offsets", "txn": txn, "ts": 1, "producer_id": producer_id,
                            "epoch": epoch, "group": group})

    async def offset_commit(self, txn: str, producer_id: int, epoch: int, group: str,
                            offsets: dict[str, tuple[int, int, str | None]]) -> TxnResult:
        return self._apply({"op": "txn_offset_commit", "txn": txn, "ts": 1, "producer_id": producer_id,
                            "epoch": epoch, "group": group, "offsets": {s: list(v) for s, v in offsets.items()}})

    def _apply(self, command: dict[str, Any]) -> TxnResult:
        result = self.txns.apply(command["op"], command)
        assert isinstance(result, TxnResult), result
        return result


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_txn_offset_commit_of_a_fenced_epoch_is_an_invalid_producer_epoch_at_every_version(version: int) -> None:
    def commit(meta: TxnMeta, epoch: int) -> list[int]:
        node: Any = SimpleNamespace(authorizer=SimpleNamespace(allows=lambda *args: True),
                                    metadata=SimpleNamespace(state=SimpleNamespace(streams={"a": None})),
                                    transactions=Coordinator(meta),
                                    groups=SimpleNamespace(active=lambda: True,  # the request names no member
                                                           check_txn_commit=lambda *args: ErrorCode.NONE))
        request = TxnOffsetCommitRequest(
            transactional_id="t", group_id="g", producer_id=7, producer_epoch=epoch,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="a", partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])
        response = asyncio.run(txn_offset_commit.handle(node, context(version), request))
        return [p.error_code for t in response.topics for p in t.partitions]

    assert commit(TIMED_OUT, 3) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert commit(ONGOING, 3) == [ErrorCode.NONE]
