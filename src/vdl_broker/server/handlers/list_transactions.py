"""ListTransactions (key 66): the transactions a coordinator knows (KIP-664), filtered by state,
producer id, (v1, KIP-994) started longer than a duration ago (one not started passes, as in
Kafka) and (v2, KIP-1152) a transactional id pattern
the whole id matches (INVALID_REGULAR_EXPRESSION when it does not compile). Every node holds the replicated state, but
only the coordinator (the metadata leader) lists it, as each Kafka broker lists only its own:
admin clients ask every node and concatenate the answers. DESCRIBE on each id, else left out."""

from __future__ import annotations

import time

from vdl_broker.cluster.transactions import TxnState
from vdl_broker.groups.consumer import compiled_regex
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ListTransactionsRequest, ListTransactionsResponse

API_KEY = ListTransactionsRequest.DECL.api_key
NAME = "ListTransactions"
R = ListTransactionsResponse
STATES = {state.value for state in TxnState}


def handle(node: NodeView, context: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    unknown = [s for s in request.state_filters if s not in STATES]
    wanted_states = set(request.state_filters)
    wanted_producers = set(request.producer_id_filters)
    duration = request.duration_filter if context.api_version >= 1 else -1
    pattern_text = request.transactional_id_pattern if context.api_version >= 2 else None
    pattern = compiled_regex(pattern_text) if pattern_text else None
    if pattern_text and pattern is None:
        # Kafka throws InvalidRegularExpression: the error response, without the unknown states.
        return error_response(request, context.api_version, ErrorCode.INVALID_REGULAR_EXPRESSION)
    now = int(time.time() * 1000)
    listed = []
    if node.transactions.active():
        for meta in sorted(node.metadata.state.transactions.txns.values(), key=lambda t: t.transactional_id):
            if wanted_states and meta.state.value not in wanted_states:
                continue
            if wanted_producers and meta.producer_id not in wanted_producers:
                continue
            # Kafka leaves out those started no longer than `duration` ago, and nothing else: one
            # not started (start -1, Empty after InitProducerId) is listed, as running since 1970
            # (# Kafka: TransactionStateManager.listTransactionStates).
            if duration >= 0 and now - meta.start_ms <= duration:
                continue
            if pattern is not None and not pattern.fullmatch(meta.transactional_id):
                continue
            if not authorized(node, context, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                              meta.transactional_id):
                continue
            listed.append(R.TransactionState(transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                                             transaction_state=meta.state.value))
    return R(error_code=0, unknown_state_filters=unknown, transaction_states=listed)


def error_response(request: ListTransactionsRequest, version: int, code: ErrorCode) -> ListTransactionsResponse:
    return R(error_code=int(code), unknown_state_filters=[], transaction_states=[])
