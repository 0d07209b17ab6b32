"""UpdateFeatures (key 57, KIP-584/KIP-778): raise the cluster's feature level
(`vdl.metadata.version`, cluster/features.py), as `kafka-features upgrade` raises Kafka's
metadata.version. Run on the metadata leader (forwarded there); needs ALTER on the cluster.

The level goes up only when every node of the cluster answers, now, that its release supports
it (ApiVersions' supported_features, asked of each node): a node that is down or older refuses
the whole update, with its id in the message. Downgrades are refused (INVALID_UPDATE_VERSION): a
finalized level may already be used by the metadata log.
"""

from __future__ import annotations

import asyncio

from vdl_broker.cluster import features
from vdl_broker.cluster.features import (
    FEATURE_NAME,
    TRANSACTION_VERSION_FEATURE,
    finalize_features_command,
    transaction_version,
)
from vdl_broker.server import internal
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from vdl_wire.messages.update_features import UPGRADE

API_KEY = UpdateFeaturesRequest.DECL.api_key
NAME = "UpdateFeatures"

Result = UpdateFeaturesResponse.UpdatableFeatureResult
NODE_ANSWER_TIMEOUT_S = 5.0


async def handle(node: NodeView, context: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    version = context.api_version
    if not authorized_cluster(node, context, Operation.ALTER):
        return error_response(request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await on_metadata_leader(node, version, request, lambda n, r: _update_here(n, r, version),
                                    error_response, context)


async def _update_here(node: NodeView, request: UpdateFeaturesRequest, version: int) -> UpdateFeaturesResponse:
    names = [update.feature for update in request.feature_updates]
    if len(set(names)) != len(names):
        return _answer(request, ErrorCode.INVALID_REQUEST, "a feature is named more than once")
    results = []
    for update in request.feature_updates:
        code, message = await _update_one(node, update, version, request.validate_only if version >= 1 else False)
        results.append(Result(feature=update.feature, error_code=int(code), error_message=message))
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)


async def _update_one(node: NodeView, update: UpdateFeaturesRequest.FeatureUpdateKey, version: int,
                      validate_only: bool) -> tuple[ErrorCode, str | None]:
    if update.feature == TRANSACTION_VERSION_FEATURE:
        # Derived from the cluster's level (cluster/features.py): asking its level is a no-op.
        txn_level = transaction_version(node.metadata.state.features.level)
        if update.max_version_level == txn_level:
            return ErrorCode.NONE, None
        return ErrorCode.INVALID_UPDATE_VERSION, (f"{TRANSACTION_VERSION_FEATURE} follows {FEATURE_NAME}: it is "
                                                  f"at level {txn_level} and cannot be set on its own")
    if update.feature != FEATURE_NAME:
        return ErrorCode.INVALID_UPDATE_VERSION, (f"unknown feature {update.feature!r}: VDL has {FEATURE_NAME} "
                                                  f"and {TRANSACTION_VERSION_FEATURE}")
    downgrade = update.allow_downgrade if version == 0 else update.upgrade_type != UPGRADE
    current = node.metadata.state.features.level
    level = update.max_version_level
    if level < current or (downgrade and level != current):
        return ErrorCode.INVALID_UPDATE_VERSION, (f"{FEATURE_NAME} is at level {current}: downgrades are not "
                                                  f"possible, the metadata may already use it")
    if level > features.SUPPORTED_LEVEL:
        return ErrorCode.INVALID_UPDATE_VERSION, (f"{FEATURE_NAME} level {level} is above what this node's "
                                                  f"release supports ({features.SUPPORTED_LEVEL})")
    behind = await _nodes_not_supporting(node, level)
    if behind:
        return ErrorCode.INVALID_UPDATE_VERSION, (f"{FEATURE_NAME} level {level} needs every node on a release "
                                                  f"supporting it: " + "; ".join(behind))
    if validate_only or level == current:
        return ErrorCode.NONE, None
    result = await node.metadata.submit(finalize_features_command(level))
    if not result.ok:
        return ErrorCode.INVALID_UPDATE_VERSION, result.message
    return ErrorCode.NONE, None


async def _nodes_not_supporting(node: NodeView, level: int) -> list[str]:
    """What each other registered node that cannot take `level` says (down, or an older release)."""
    others = sorted(n for n in node.metadata.state.nodes if n != node.node_id)
    answers = await asyncio.gather(*(_supported_level(node, node_id) for node_id in others),
                                   return_exceptions=True)
    behind = []
    for node_id, answer in zip(others, answers, strict=True):
        if isinstance(answer, BaseException):
            behind.append(f"node {node_id} did not answer ({answer.__class__.__name__})")
        elif answer < level:
            behind.append(f"node {node_id} supports up to level {answer}")
    return behind


async def _supported_level(node: NodeView, node_id: int) -> int:
    """The highest level node `node_id`'s release supports (0: a release before feature levels)."""
    response: ApiVersionsResponse = await internal.call(node, node_id, ApiVersionsRequest(), 3, NODE_ANSWER_TIMEOUT_S)
    for feature in response.supported_features or []:
        if feature.name == FEATURE_NAME:
            return int(feature.max_version)
    return 0


def _answer(request: UpdateFeaturesRequest, code: ErrorCode, message: str | None) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                  results=[Result(feature=u.feature, error_code=int(code), error_message=message)
                                           for u in request.feature_updates])


def error_response(request: UpdateFeaturesRequest, version: int, code: ErrorCode,
                   message: str | None = None) -> UpdateFeaturesResponse:
    return _answer(request, code, message)
