"""EndTxn (key 26): commit or abort the producer's ongoing transaction, on the coordinator (the
metadata leader). The answer comes once the decision is committed in the metadata, as Kafka's
does once PrepareCommit/PrepareAbort is in its transaction log: the markers follow, so a
read_committed consumer sees the transaction a moment after the commit returns (its last stable
offset holds it back until then), and the producer's next transaction waits for them on the
coordinator (transactions/coordinator.py).

v5 (KIP-890 part 2, EndTxnRequest.json): the epoch is bumped with every decision and the answer
names the producer id and the new epoch, which the producer's next transaction uses. The
markers carry the bumped epoch, so a delayed produce or EndTxn of the ended transaction is
fenced instead of landing on the next one. When the epoch is exhausted (Short.MaxValue - 1), the
markers carry Short.MaxValue and the answer names a new producer id with epoch 0."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import EndTxnRequest, EndTxnResponse

API_KEY = EndTxnRequest.DECL.api_key
NAME = "EndTxn"
FENCED_VERSION = 2
BUMP_VERSION = 5


async def handle(node: NodeView, context: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    version = context.api_version
    if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not node.transactions.active():
        return error_response(request, version, ErrorCode.NOT_COORDINATOR)
    result = await node.transactions.end(request.transactional_id, request.producer_id, request.producer_epoch,
                                           request.committed, bump=version >= BUMP_VERSION)
    response = error_response(request, version, error_of(result))
    if version >= BUMP_VERSION and not isinstance(result, ErrorCode) and result.meta is not None \
            and result.error == ErrorCode.NONE:
        # With an exhausted epoch, the new producer id and epoch 0 (KIP-890 part 2).
        response.producer_id, response.producer_epoch = result.meta.producer_ids()
    return response


def error_response(request: EndTxnRequest, version: int, code: ErrorCode) -> EndTxnResponse:
    if code is ErrorCode.PRODUCER_FENCED and version < FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(error_code=int(code))
