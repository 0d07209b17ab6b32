"""DescribeTransactions (key 65): transactional ids' coordinator state (KIP-664), answered by the
coordinator (the metadata leader; NOT_COORDINATOR elsewhere). DESCRIBE on each id."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

API_KEY = DescribeTransactionsRequest.DECL.api_key
NAME = "DescribeTransactions"
R = DescribeTransactionsResponse


def _refused(txn: str, code: ErrorCode) -> R.TransactionState:
    return R.TransactionState(error_code=int(code), transactional_id=txn, transaction_state="",
                              transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                              producer_epoch=-1, topics=[])


def handle(node: NodeView, context: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = []
    for txn in request.transactional_ids:
        if not authorized(node, context, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn):
            states.append(_refused(txn, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        if not node.transactions.active():
            states.append(_refused(txn, ErrorCode.NOT_COORDINATOR))
            continue
        meta = node.transactions.state(txn)
        if meta is None:
            states.append(_refused(txn, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            continue
        states.append(R.TransactionState(
            error_code=0, transactional_id=txn, transaction_state=meta.state.value,
            transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
            producer_id=meta.producer_id, producer_epoch=meta.epoch,
            topics=[R.TopicData(topic=stream, partitions=[0]) for stream in meta.streams]))
    return R(transaction_states=states)


def error_response(request: DescribeTransactionsRequest, version: int, code: ErrorCode) -> DescribeTransactionsResponse:
    return R(transaction_states=[_refused(txn, code) for txn in request.transactional_ids])
