"""A transactional producer's coordinator side (KIP-98): InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, each at the transaction
coordinator (FindCoordinator key type 1) and retried through coordinator changes.

The classic protocol (transaction version 1): every stream is added with AddPartitionsToTxn
before its first transactional batch, and EndTxn is spoken at v4 at most, so the producer keeps
its epoch across transactions (EndTxn v5 is KIP-890 part 2's per-transaction epoch bump). EndTxn
needs only the transactional id, producer id and epoch, so any client holding them may end the
transaction (the Spark sink's driver ends the transactions its tasks wrote).

The batches themselves go to the streams' leaders as usual (Produce with the transactional id
and batches with the transactional attribute; see pipeline.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vdl_client.client import VdlClient
from vdl_client.routes import TRANSACTION_KEY, CoordinatorOf
from vdl_client.settings import LEADER_ERRORS, RetriableError, VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

ADD_PARTITIONS_VERSION = 3  # the client's form; v4+ is the broker-to-broker verification (KIP-890)
END_TXN_VERSION = 4  # v5 bumps the epoch per transaction (KIP-890 part 2, transaction version 2)
TXN_OFFSET_COMMIT_VERSION = 3  # v3+: generation and member id (KIP-447); -1 / "" for no group member
# The coordinator is still completing an earlier commit or abort of this id (or aborting the
# open transaction a new InitProducerId found): the same request succeeds once it is done.
_RETRY = LEADER_ERRORS | {ErrorCode.CONCURRENT_TRANSACTIONS}


class ProducerFencedError(VdlClientError):
    """A newer instance took the transactional id (its InitProducerId bumped the epoch), or the
    coordinator aborted the transaction after its timeout: this producer can no longer end it."""


_FENCED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_ID_MAPPING}


@dataclass(frozen=True)
class TxnProducer:
    """What ends a transaction: the id and the producer id and epoch InitProducerId gave it."""

    transactional_id: str
    producer_id: int
    epoch: int


def _coordinator_call(client: VdlClient, transactional_id: str, request: Any, what: str,
                      error_of: Any, version: int | None = None, deadline: float | None = None) -> tuple[Any, int]:
    """`request` at the transaction coordinator until it answers something else than a retriable
    error (CONCURRENT_TRANSACTIONS included); (response, its error code)."""
    route = CoordinatorOf(transactional_id, TRANSACTION_KEY)

    def attempt() -> tuple[Any, int]:
        response = client.send(route, request, version=version)
        code = error_of(response)
        if code and ErrorCode(code) in _RETRY:
            raise RetriableError(f"{what}: {ErrorCode(code).name}")
        return response, code

    return client.retrying(what, attempt, deadline)


def _check(code: int, what: str) -> None:
    if code == 0:
        return
    if ErrorCode(code) in _FENCED:
        raise ProducerFencedError(f"{what}: {ErrorCode(code).name} (fenced by a newer instance of the "
                                  "transactional id, or aborted after its transaction timeout)")
    raise VdlClientError(f"{what}: {ErrorCode(code).name} ({code})")


def init_transactions(client: VdlClient, transactional_id: str, timeout_ms: int,
                      deadline: float | None = None) -> TxnProducer:
    """InitProducerId with `transactional_id`: the id's producer id at a bumped epoch, which
    fences every older instance; a transaction the old instance left open is aborted first."""
    request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms)
    what = f"InitProducerId {transactional_id!r}"
    response, code = _coordinator_call(client, transactional_id, request, what, lambda r: r.error_code,
                                       deadline=deadline)
    _check(code, what)
    return TxnProducer(transactional_id, response.producer_id, response.producer_epoch)


def add_streams(client: VdlClient, producer: TxnProducer, streams: list[str]) -> None:
    """AddPartitionsToTxn: `streams` join the transaction (before their first batch in it)."""
    topics = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=s, partitions=[0]) for s in sorted(streams)]
    request = AddPartitionsToTxnRequest(v3_and_below_transactional_id=producer.transactional_id,
                                        v3_and_below_producer_id=producer.producer_id,
                                        v3_and_below_producer_epoch=producer.epoch, v3_and_below_topics=topics)

    def first_error(response: Any) -> int:
        return next((p.partition_error_code for t in response.results_by_topic_v3_and_below
                     for p in t.results_by_partition if p.partition_error_code), 0)

    what = f"AddPartitionsToTxn {producer.transactional_id!r} {sorted(streams)}"
    _, code = _coordinator_call(client, producer.transactional_id, request, what, first_error, ADD_PARTITIONS_VERSION)
    _check(code, what)


def commit_offsets_in_transaction(client: VdlClient, producer: TxnProducer, group: str, offsets: Mapping[str, int],
                                  metadata: str | None = None) -> None:
    """AddOffsetsToTxn + TxnOffsetCommit: `offsets` (stream -> offset) become `group`'s committed
    offsets if and when the transaction commits (never if it aborts)."""
    txn = producer.transactional_id
    what = f"AddOffsetsToTxn {txn!r} {group!r}"
    _, code = _coordinator_call(client, txn, AddOffsetsToTxnRequest(
        transactional_id=txn, producer_id=producer.producer_id, producer_epoch=producer.epoch, group_id=group),
        what, lambda r: r.error_code)
    _check(code, what)
    request = TxnOffsetCommitRequest(
        transactional_id=txn, group_id=group, producer_id=producer.producer_id, producer_epoch=producer.epoch,
        generation_id=-1, member_id="", group_instance_id=None, topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=stream, partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=metadata)])
            for stream, offset in sorted(offsets.items())])

    def first_error(response: Any) -> int:
        return next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)

    what = f"TxnOffsetCommit {txn!r} {group!r}"
    _, code = _coordinator_call(client, txn, request, what, first_error, TXN_OFFSET_COMMIT_VERSION)
    _check(code, what)


def end_transaction(client: VdlClient, producer: TxnProducer, commit: bool, deadline: float | None = None) -> None:
    """EndTxn: commit or abort. A retry of an EndTxn whose answer was lost succeeds (the
    coordinator answers a repeated decision with success), so this is safe to call again."""
    request = EndTxnRequest(transactional_id=producer.transactional_id, producer_id=producer.producer_id,
                            producer_epoch=producer.epoch, committed=commit)
    what = f"EndTxn {'commit' if commit else 'abort'} {producer.transactional_id!r}"
    _, code = _coordinator_call(client, producer.transactional_id, request, what, lambda r: r.error_code,
                                END_TXN_VERSION, deadline)
    _check(code, what)
