"""ApiVersions (key 18): exactly the APIs and versions this broker implements (the README's
"Kafka APIs served"), and from v3 the feature levels (cluster/features.py): what this node's
release supports and what the cluster has finalized."""

from __future__ import annotations

import re

from vdl_broker.cluster import features
from vdl_broker.cluster.features import (
    BASELINE_LEVEL,
    FEATURE_NAME,
    TRANSACTION_VERSION_FEATURE,
    TRANSACTION_VERSION_MAX,
    transaction_version,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire import api
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ApiVersionsRequest, ApiVersionsResponse

API_KEY = ApiVersionsRequest.DECL.api_key
NAME = "ApiVersions"
SupportedFeature = ApiVersionsResponse.SupportedFeatureKey
FinalizedFeature = ApiVersionsResponse.FinalizedFeatureKey
# KIP-511: ClientSoftwareName and ClientSoftwareVersion (v3+) start and end with a letter or
# digit, with '-' and '.' between; Kafka answers anything else INVALID_REQUEST, listing no APIs.
SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_response(error: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    response: ApiVersionsResponse = api.api_versions_response(error)
    return response


def handle(node: NodeView, context: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    # Another node's call (update_features asks each node's supported level) names no software.
    if context.api_version >= 3 and not context.forwarded and not all(
            SOFTWARE_NAME_OR_VERSION.fullmatch(text) for text in (request.client_software_name,
                                                                 request.client_software_version)):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    response = supported_response()
    if context.api_version >= 3:  # the feature fields exist from v3 (KIP-584)
        finalized = node.metadata.state.features
        supported = [
            SupportedFeature(name=FEATURE_NAME, min_version=BASELINE_LEVEL, max_version=features.SUPPORTED_LEVEL),
            SupportedFeature(name=TRANSACTION_VERSION_FEATURE, min_version=0, max_version=TRANSACTION_VERSION_MAX)]
        if context.api_version < 4:
            # Clients before Kafka 3.9 throw on a supported range starting at 0 (their admin
            # and producer threads die); v4 says the client takes it, and below it Kafka leaves
            # such features out (KAFKA-17011; ApiVersionsResponse.json, SupportedFeatures).
            supported = [feature for feature in supported if feature.min_version > 0]
        response.supported_features = supported
        # -1 means "unknown": the Java client then ignores the finalized features (its ApiVersions
        # keeps only an epoch above the last seen, -1 at first). The level a cluster was formed
        # at holds from its first entry: epoch 0 until a finalize.
        response.finalized_features_epoch = max(finalized.finalized_index, 0)
        response.finalized_features = [FinalizedFeature(name=FEATURE_NAME, max_version_level=finalized.level,
                                                        min_version_level=finalized.level)]
        txn_level = transaction_version(finalized.level)
        if txn_level:  # Kafka lists a feature at level 0 as not finalized
            response.finalized_features.append(FinalizedFeature(name=TRANSACTION_VERSION_FEATURE,
                                                                max_version_level=txn_level,
                                                                min_version_level=txn_level))
    return response


def error_response(request: ApiVersionsRequest, version: int, code: ErrorCode) -> ApiVersionsResponse:
    return supported_response(code)
