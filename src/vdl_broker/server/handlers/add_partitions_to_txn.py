"""AddPartitionsToTxn (key 24): a producer adds streams to its ongoing transaction, on the
transaction coordinator (the metadata leader). Only partition 0 exists. v4 (sent by brokers,
KIP-890 part 1) batches transactions; verify_only there only checks the partitions are in the
transaction (a stream leader here reads the replicated coordinator state itself instead; a Kafka
broker's check gets Kafka's answers)."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

API_KEY = AddPartitionsToTxnRequest.DECL.api_key
NAME = "AddPartitionsToTxn"
BATCHED_VERSION = 4
FENCED_VERSION = 2  # older clients know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH

R = AddPartitionsToTxnResponse
Code = dict[tuple[str, int], ErrorCode]


def _topic_results(topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic], codes: Code,
                   version: int) -> list[R.AddPartitionsToTxnTopicResult]:
    def fit(code: ErrorCode) -> int:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH if code is ErrorCode.PRODUCER_FENCED and version < FENCED_VERSION
                   else code)
    return [R.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
        R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=fit(codes[(t.name, p)]))
        for p in t.partitions]) for t in topics]


def _verified(node: NodeView, txn: str, producer_id: int, epoch: int, every: list[tuple[str, int]]) -> Code:
    """verify_only, as Kafka's TransactionCoordinator.handleVerifyPartitionsInTransaction answers
    (Kafka 4.4, v4 too): a fenced epoch (a timeout's or a new instance's bump) is PRODUCER_FENCED,
    which a stream leader answers the produce as INVALID_PRODUCER_EPOCH; a partition not in the
    transaction is TRANSACTION_ABORTABLE (KIP-890)."""
    meta = node.transactions.state(txn)
    if meta is None or meta.producer_id != producer_id:
        return dict.fromkeys(every, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if meta.epoch != epoch:
        return dict.fromkeys(every, ErrorCode.PRODUCER_FENCED)
    if meta.state.decided:
        return dict.fromkeys(every, ErrorCode.CONCURRENT_TRANSACTIONS)
    return {key: ErrorCode.NONE if key[0] in meta.streams else ErrorCode.TRANSACTION_ABORTABLE for key in every}


async def _one(node: NodeView, context: RequestContext, txn: str, producer_id: int, epoch: int,
               topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
               verify_only: bool) -> Code:
    every = [(t.name, p) for t in topics for p in t.partitions]
    if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return dict.fromkeys(every, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not node.transactions.active():
        return dict.fromkeys(every, ErrorCode.NOT_COORDINATOR)
    codes: Code = {}
    streams = node.metadata.state.streams
    for name, partition in every:
        if not authorized(node, context, Operation.WRITE, ResourceType.TOPIC, name):
            codes[(name, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif name not in streams or partition != 0:
            codes[(name, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if codes:
        # Kafka adds nothing when any partition fails; the others answer OPERATION_NOT_ATTEMPTED.
        return {key: codes.get(key, ErrorCode.OPERATION_NOT_ATTEMPTED) for key in every}
    if verify_only:
        return _verified(node, txn, producer_id, epoch, every)
    result = await node.transactions.add_partitions(txn, producer_id, epoch, sorted({n for n, _ in every}))
    return dict.fromkeys(every, error_of(result))


async def handle(node: NodeView, context: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    version = context.api_version
    if version >= BATCHED_VERSION:
        results = []
        for txn in request.transactions:
            codes = await _one(node, context, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                               txn.topics, txn.verify_only)
            results.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                      topic_results=_topic_results(txn.topics, codes, version)))
        return R(error_code=0, results_by_transaction=results)
    topics = request.v3_and_below_topics
    codes = await _one(node, context, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                       request.v3_and_below_producer_epoch, topics, False)
    return R(results_by_topic_v3_and_below=_topic_results(topics, codes, version))


def error_response(request: AddPartitionsToTxnRequest, version: int, code: ErrorCode) -> AddPartitionsToTxnResponse:
    if version >= BATCHED_VERSION:
        return R(error_code=int(code), results_by_transaction=[
            R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topic_results(
                t.topics, {(x.name, p): code for x in t.topics for p in x.partitions}, version))
            for t in request.transactions])
    topics = request.v3_and_below_topics
    return R(results_by_topic_v3_and_below=_topic_results(
        topics, {(t.name, p): code for t in topics for p in t.partitions}, version))
