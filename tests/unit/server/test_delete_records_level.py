"""DeleteRecords below feature level 2: refused before anything is proposed, so a release that
cannot read a LOG_START entry never meets one during a rolling upgrade."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from vdl_broker.cluster.features import DELETE_RECORDS_LEVEL, FeaturesState
from vdl_broker.server.handlers import delete_records
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteRecordsRequest


def test_delete_records_is_unsupported_below_its_feature_level() -> None:
    node = SimpleNamespace(metadata=SimpleNamespace(state=SimpleNamespace(features=FeaturesState(
        level=DELETE_RECORDS_LEVEL - 1))))
    request = DeleteRecordsRequest(timeout_ms=1000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name="s", partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=5)])])
    response = asyncio.run(delete_records.handle(node, SimpleNamespace(api_version=2), request))  # type: ignore[arg-type]
    assert [(t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
            for t in response.topics] == [("s", [(0, -1, ErrorCode.UNSUPPORTED_VERSION)])]
