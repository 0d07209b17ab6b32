"""The client's transactional calls: at the transaction coordinator, at the classic protocol's
versions (AddPartitionsToTxn v3, EndTxn v4), retried while the coordinator is busy."""

from __future__ import annotations

import pytest

from tests.unit.client.fake_cluster import FakeCluster, address, settings
from vdl_client import VdlClient
from vdl_client.transactions import (
    ProducerFencedError,
    TxnProducer,
    add_streams,
    end_transaction,
    init_transactions,
)
from vdl_wire.errors import ErrorCode


def test_a_transaction_goes_to_its_coordinator_at_the_classic_versions() -> None:
    cluster = FakeCluster()
    cluster.coordinator = 2
    cluster.leaders["s"] = 3
    with VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep) as client:
        producer = init_transactions(client, "t", 60_000)
        assert producer == TxnProducer("t", 7, 3)
        add_streams(client, producer, ["s"])
        end_transaction(client, producer, commit=True)
    to_coordinator = [(name, version) for (addr, name), (_, version) in zip(cluster.sent, cluster.versions, strict=True)
                      if addr == address(2) and name != "FindCoordinatorRequest"]
    assert to_coordinator == [("InitProducerIdRequest", None), ("AddPartitionsToTxnRequest", 3), ("EndTxnRequest", 4)]


def test_concurrent_transactions_is_retried_and_a_fenced_producer_is_told() -> None:
    cluster = FakeCluster()
    cluster.errors[(1, "InitProducerIdRequest")] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 2
    cluster.errors[(1, "EndTxnRequest")] = [ErrorCode.PRODUCER_FENCED]
    with VdlClient(settings(), connect=cluster.connect, sleep=cluster.sleep) as client:
        producer = init_transactions(client, "t", 60_000)
        assert len(cluster.slept) == 2  # two backoffs, then the answer
        with pytest.raises(ProducerFencedError, match="EndTxn commit 't': PRODUCER_FENCED"):
            end_transaction(client, producer, commit=True)
