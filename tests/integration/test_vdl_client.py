"""vdl_client against a real broker: the broker's one-shot peer request, bootstrap lists with a dead server first,
and failing fast when nothing answers."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.cluster import BrokerProcess, free_port
from vdl_broker.server import peer_request
from vdl_client import (
    BrokerUnreachableError,
    ClientSettings,
    StreamExistsError,
    StreamNotFoundError,
    VdlClient,
    connect_first,
    request_once,
)
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode


def test_peer_request_decodes_the_answer(module_broker: BrokerProcess) -> None:
    topic = m.CreateTopicsRequest.CreatableTopic(name="aio", num_partitions=1, replication_factor=-1)
    created = asyncio.run(peer_request.request(module_broker.bootstrap, m.CreateTopicsRequest(topics=[topic], timeout_ms=10_000),
                                      10.0, client_id="test-aio"))
    assert [(t.name, t.error_code) for t in created.topics] == [("aio", 0)]
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="aio")])
    metadata_v1 = asyncio.run(peer_request.request(module_broker.bootstrap, request, 10.0, version=1))
    assert [t.name for t in metadata_v1.topics] == ["aio"] and metadata_v1.controller_id == 1


def test_peer_request_to_a_dead_address_raises_oserror() -> None:
    with pytest.raises(OSError):
        asyncio.run(peer_request.request(f"127.0.0.1:{free_port()}", m.MetadataRequest(topics=[]), 2.0))


def test_bootstrap_list_with_a_dead_server_first(module_broker: BrokerProcess) -> None:
    servers = f"127.0.0.1:{free_port()},{module_broker.bootstrap}"
    with connect_first(servers, 5.0) as connection:
        assert connection.address == module_broker.bootstrap
    assert request_once(servers, m.MetadataRequest(topics=[])).brokers[0].port == module_broker.port
    with VdlClient(ClientSettings.from_bootstrap(servers, deadline_ms=10_000)) as client:
        client.create_stream("listed", exist_ok=False)
        with pytest.raises(StreamExistsError):
            client.create_stream("listed", exist_ok=False)
        assert "listed" in client.list_streams()
        assert client.leader_of("listed") == 1
        with pytest.raises(StreamNotFoundError):
            client.delete_streams(["never-created"], missing_ok=False)


def test_unreachable_bootstrap_fails_fast_when_asked() -> None:
    servers = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    started = time.monotonic()
    with VdlClient(ClientSettings.from_bootstrap(servers, fail_fast_when_unreachable=True)) as client:
        with pytest.raises(BrokerUnreachableError, match="cannot connect to"):
            client.list_streams()
    assert time.monotonic() - started < 5


def test_acks_zero_produce_gets_no_answer_and_lands(module_broker: BrokerProcess) -> None:
    from tests.support.kafka import one_record_batch

    with VdlClient(ClientSettings.from_bootstrap(module_broker.bootstrap, deadline_ms=10_000)) as client:
        client.create_streams(["acks0"])
        deadline = time.monotonic() + 10
        assert client.produce("acks0", one_record_batch(b"fire"), 5000, deadline, acks=0) == -1
        assert client.produce("acks0", one_record_batch(b"forget"), 5000, deadline, acks=1) == 1
        result = client.fetch("acks0", 0, 1 << 20, 1 << 20, 100, deadline)
        assert result.error == ErrorCode.NONE and result.high_watermark == 2


def test_api_versions_and_find_coordinator(module_broker: BrokerProcess) -> None:
    from vdl_wire.api import supported_api_versions

    with VdlClient(ClientSettings.from_bootstrap(module_broker.bootstrap, deadline_ms=10_000)) as client:
        assert client.api_versions() == {key: (low, high) for key, low, high in supported_api_versions()}
        assert client.find_coordinator("some-group") == (1, module_broker.bootstrap)


def test_last_sequence_is_the_producers_last_stored_one(module_broker: BrokerProcess) -> None:
    """What an exactly-once Spark writer's replay asks before it goes on (DescribeProducers at the
    stream's leader, about its producer id only): -1 for a producer id that stored nothing there."""
    from vdl_client.routes import LeaderOf
    from vdl_wire.records.record_batch import RecordBatchBuilder

    with VdlClient(ClientSettings((module_broker.bootstrap,))) as client:
        client.create_stream("last-seq")
        producer_id, epoch = client.writer_id("tests/last-sequence")
        assert client.last_sequence("last-seq", producer_id) == -1
        deadline = time.monotonic() + 30
        for base, count in ((0, 3), (3, 4)):
            builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=base)
            for i in range(count):
                builder.append(1_700_000_000_000, None, b"%d" % (base + i))
            client.produce("last-seq", builder.build(), 5000, deadline)
        assert client.last_sequence("last-seq", producer_id) == 6
        assert client.last_sequence("last-seq", producer_id + 1) == -1
        other, other_epoch = client.init_producer_id()
        builder = RecordBatchBuilder(producer_id=other, producer_epoch=other_epoch, base_sequence=0)
        builder.append(1_700_000_000_000, None, b"other")
        client.produce("last-seq", builder.build(), 5000, deadline)

        def described(only: list[int] | None) -> list[tuple[int, int]]:
            request = m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
                name="last-seq", partition_indexes=[0])], vdl_producer_ids=only)
            partition = client.call(LeaderOf("last-seq"), request).topics[0].partitions[0]
            return [(p.producer_id, p.last_sequence) for p in partition.active_producers]

        # Kafka's request lists every producer; VDL's tagged field only those it names.
        assert described(None) == sorted([(producer_id, 6), (other, 0)])
        assert described([producer_id, producer_id + 1]) == [(producer_id, 6)]
        with pytest.raises(StreamNotFoundError):
            client.last_sequence("no-such-stream", producer_id)
