"""The marker writer (transactions/markers.py) sends a stream leader one WriteTxnMarkers with every
marker asked of it meanwhile, and tells each transaction which of its streams hold their marker."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from vdl_broker.cluster.transactions import NO_EPOCH, TxnMeta, TxnState
from vdl_broker.transactions import markers
from vdl_wire.messages import WriteTxnMarkersResponse as R

pytestmark = pytest.mark.unit


def meta(txn: str, pid: int, streams: tuple[str, ...], decision: int = 0) -> TxnMeta:
    return TxnMeta(txn, pid, 0, NO_EPOCH, TxnState.PREPARE_COMMIT, streams, 60000, 1, 1, decision=decision)


def test_markers_for_one_leader_travel_together(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []

    async def write(broker: Any, request: Any) -> Any:
        sent.append(request)
        # The stream "down" refuses (its leader moved): the others are written.
        return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t.name, partitions=[R.WritableTxnMarkerPartitionResult(
                partition_index=0, error_code=6 if t.name == "down" else 0)]) for t in m.topics])
            for m in request.markers])

    monkeypatch.setattr(markers, "write_markers", write)
    broker = SimpleNamespace(node_id=1, metadata=SimpleNamespace(state=SimpleNamespace(streams={"a": 0, "b": 0,
                                                                                                "down": 0})),
                             replicas=SimpleNamespace(get=lambda name: SimpleNamespace(leader_id=1)))
    writer = markers.BrokerMarkerWriter(broker)  # type: ignore[arg-type]

    async def run() -> list[set[str]]:
        return list(await asyncio.gather(writer.write_markers(meta("t1", 10, ("a", "b"), 4), True, ["a", "b"]),
                                         writer.write_markers(meta("t2", 20, ("b", "down")), False, ["b", "down"]),
                                         writer.write_markers(meta("t3", 30, ("gone",)), True, ["gone"])))

    assert asyncio.run(run()) == [{"a", "b"}, {"b"}, {"gone"}]
    assert len(sent) == 1
    # Each carries its decision's number as its coordinator epoch (0: an unnumbered decision).
    assert [(m.producer_id, m.transaction_result, m.coordinator_epoch, [t.name for t in m.topics])
            for m in sent[0].markers] == [(10, True, 4, ["a", "b"]), (20, False, 0, ["b", "down"])]
