"""ApiVersions (key 18): exactly the APIs and versions this broker implements (DESIGN.md table),
and from v3 the feature levels (cluster/features.py): what this node's release supports and what
the cluster has finalized."""

from __future__ import annotations

from vdl_broker.cluster import features
from vdl_broker.cluster.features import BASELINE_LEVEL, FEATURE_NAME
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire import api
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ApiVersionsRequest, ApiVersionsResponse

API_KEY = ApiVersionsRequest.DECL.api_key
NAME = "ApiVersions"
SupportedFeature = ApiVersionsResponse.SupportedFeatureKey
FinalizedFeature = ApiVersionsResponse.FinalizedFeatureKey


def supported_response(error: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    response: ApiVersionsResponse = api.api_versions_response(error)
    return response


def handle(node: NodeView, context: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    response = supported_response()
    if context.api_version >= 3:  # the feature fields exist from v3 (KIP-584)
        finalized = node.metadata.state.features
        response.supported_features = [SupportedFeature(name=FEATURE_NAME, min_version=BASELINE_LEVEL,
                                                        max_version=features.SUPPORTED_LEVEL)]
        response.finalized_features_epoch = finalized.finalized_index
        response.finalized_features = [FinalizedFeature(name=FEATURE_NAME, max_version_level=finalized.level,
                                                        min_version_level=finalized.level)]
    return response


def error_response(request: ApiVersionsRequest, version: int, code: ErrorCode) -> ApiVersionsResponse:
    return supported_response(code)
