"""api.py: the advertised table, header versions, unsupported api/version answers, zero copy."""

from __future__ import annotations

import struct

import pytest

from vdl_wire.api import (
    API_SPECS,
    UnsupportedApiError,
    UnsupportedVersionError,
    api_versions_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_unsupported_version_response,
    supported_api_versions,
)
from vdl_wire.codec import decode_message
from vdl_wire.errors import DecodeError, ErrorCode
from vdl_wire.headers import RequestHeader
from vdl_wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
)

# The README's "Kafka APIs served": exactly what we advertise.
TABLE = [
    (0, 0, 12),
    (1, 0, 12),
    (2, 0, 11),
    (3, 0, 13),
    (8, 0, 9),
    (9, 0, 9),
    (10, 0, 6),
    (11, 0, 9),
    (12, 0, 4),
    (13, 0, 5),
    (14, 0, 5),
    (15, 0, 6),
    (16, 0, 5),
    (17, 0, 1),
    (18, 0, 4),
    (19, 0, 7),
    (20, 0, 6),
    (21, 0, 2),
    (22, 0, 4),
    (23, 0, 4),
    (24, 0, 4),
    (25, 0, 3),
    (26, 0, 5),
    (27, 0, 1),
    (28, 0, 5),
    (29, 0, 3),
    (30, 0, 3),
    (31, 0, 3),
    (32, 0, 4),
    (33, 0, 2),
    (34, 0, 2),
    (35, 0, 5),
    (36, 0, 2),
    (37, 0, 3),
    (42, 0, 2),
    (43, 0, 2),
    (44, 0, 1),
    (45, 0, 1),
    (46, 0, 0),
    (47, 0, 0),
    (48, 0, 1),
    (49, 0, 1),
    (50, 0, 0),
    (51, 0, 0),
    (55, 0, 2),
    (57, 0, 1),
    (60, 0, 1),
    (61, 0, 0),
    (65, 0, 0),
    (66, 0, 2),
    (68, 0, 1),
    (69, 0, 1),
    (74, 0, 1),
    (75, 0, 0),
    (10000, 0, 0),  # VdlNodes: VDL's own (protocol/messages/vdl_nodes.py)
    (10001, 0, 0),  # VdlWriterId: VDL's own (the Spark sink's producer ids)
]

# The highest version Apache Kafka 3.0 serves of each API (# message defs at tag 3.0.0:
# clients/src/main/resources/common/message/*Request.json): clients that pin a broker version
# instead of asking (kafka-python's api_version=(3, 0)) send these, so every API served here is
# served at least that far.
KAFKA_3_0 = {0: 9, 1: 12, 2: 7, 3: 11, 8: 8, 9: 8, 10: 4, 11: 7, 12: 4, 13: 4, 14: 5, 15: 5, 16: 4, 17: 1,
             18: 3, 19: 7, 20: 6, 21: 2, 22: 4, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 3,
             42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: 0, 50: 0, 51: 0, 55: 0, 60: 0, 61: 0, 65: 0, 66: 0}


def _join(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


def test_supported_api_versions_is_exactly_the_table() -> None:
    assert supported_api_versions() == TABLE
    response = api_versions_response()
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == TABLE


def test_every_api_served_as_far_as_kafka_3_0_serves_it() -> None:
    served = {key: (low, high) for key, low, high in supported_api_versions()}
    short = {key: (served[key], wanted) for key, wanted in KAFKA_3_0.items()
             if key in served and (served[key][0] > 0 or served[key][1] < wanted)}
    assert short == {}


# The first flexible version of each API (# message defs: "flexibleVersions"); None: never.
FLEXIBLE_FROM = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 17: None,
                 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 29: 2, 30: 2, 31: 2, 32: 4,
                 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: None, 48: 1, 49: 1, 50: 0, 51: 0, 55: 0, 57: 0, 60: 0,
                 61: 0, 65: 0, 66: 0, 68: 0, 69: 0, 74: 0, 75: 0,
                 10000: 0, 10001: 0}  # VdlNodes, VdlWriterId (ours)


def test_flexible_versions_are_kafkas() -> None:
    for key, spec in API_SPECS.items():
        first = FLEXIBLE_FROM[key]
        expected = first if first is not None and first <= spec.max_version else None
        assert spec.flexible_from == expected, spec.name


def _frame_header(api_key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, 1) + b"c"


def test_unsupported_api_carries_ids() -> None:
    with pytest.raises(UnsupportedApiError) as info:
        decode_request(_frame_header(38, 2, 77))  # CreateDelegationToken is not offered
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (38, 2, 77)
    assert isinstance(info.value, DecodeError)
    assert info.value.header.correlation_id == 77


def test_unsupported_version_and_kafka_style_answer() -> None:
    frame = _frame_header(18, 5, 99) + b"\x00\x00\x00"  # ApiVersions v5: body not parsed
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    err = info.value
    assert (err.api_key, err.api_version, err.correlation_id) == (18, 5, 99)
    out = _join(encode_unsupported_version_response(err))
    assert struct.unpack(">i", out[:4])[0] == len(out) - 4
    assert struct.unpack(">i", out[4:8])[0] == 99  # response header v0: correlation id only
    body, end = decode_message(ApiVersionsResponse, 0, out[8:], exact=True)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == TABLE
    # A client that asked with v3 reads this v0 body (KIP-511 fallback).
    correlation_id, response = decode_response(18, 3, out[4:])
    assert correlation_id == 99 and response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert len(response.api_keys) == len(TABLE)


def test_unsupported_version_of_other_api() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(_frame_header(0, 13, 5))
    assert "Produce" in str(info.value)
    with pytest.raises(UnsupportedVersionError):
        decode_request(_frame_header(1, 13, 5))  # Fetch v13 names topics by id


def test_api_versions_v3_request_header_v2_and_response_header_v0() -> None:
    request = ApiVersionsRequest(client_software_name="vdl", client_software_version="1.0")
    frame = _join(encode_request(18, 3, 11, "cid", request))
    # header v2: int16 key, int16 version, int32 correlation, int16 client id (not compact), tag buffer
    assert frame[4:18] == struct.pack(">hhih", 18, 3, 11, 3) + b"cid" + b"\x00"
    header, decoded = decode_request(frame[4:])
    assert decoded == request
    out = _join(encode_response(header, api_versions_response()))
    assert out[4:8] == struct.pack(">i", 11)
    assert out[8:10] == b"\x00\x00"  # error_code directly after a v0 header (no tag buffer)
    assert decode_response(18, 3, out[4:]) == (11, api_versions_response())


def test_metadata_request_header_v1() -> None:
    frame = _join(encode_request(3, 1, 1, None, MetadataRequest(topics=None)))
    assert frame[4:14] == struct.pack(">hhih", 3, 1, 1, -1)
    header, request = decode_request(frame[4:])
    assert header.client_id is None and request.topics is None


def test_fetch_response_passes_stored_buffers_through() -> None:
    batch_a = memoryview(bytearray(b"A" * 1000))
    batch_b = b"B" * 600
    partition = FetchResponse.PartitionData(partition_index=0, high_watermark=10, records=[batch_a, batch_b])
    response = FetchResponse(
        responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])]
    )
    header = RequestHeader(request_api_key=1, request_api_version=11, correlation_id=3)
    parts = encode_response(header, response)
    assert any(p is batch_a for p in parts) and any(p is batch_b for p in parts)
    out = _join(parts)
    assert struct.unpack(">i", out[:4])[0] == len(out) - 4
    assert sum(len(p) for p in parts) == len(out)
    correlation_id, decoded = decode_response(1, 11, out[4:])
    records = decoded.responses[0].partitions[0].records
    assert correlation_id == 3 and isinstance(records, memoryview)
    assert bytes(records) == b"A" * 1000 + b"B" * 600


def test_decoded_records_are_slices_of_the_frame() -> None:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=100,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="s", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"x" * 64)]
            )
        ],
    )
    frame = _join(encode_request(0, 8, 1, "p", request))
    body = memoryview(frame)[4:]
    _, decoded = decode_request(body)
    records = decoded.topic_data[0].partition_data[0].records
    assert records.obj is frame and bytes(records) == b"x" * 64


def test_defaults_let_handlers_set_only_what_they_need() -> None:
    partition = FetchResponse.PartitionData()
    assert partition.last_stable_offset == -1 and partition.records is None
    assert partition.aborted_transactions == [] and partition.preferred_read_replica == -1
    assert FetchResponse.PartitionData() == FetchResponse.PartitionData()
    assert FetchResponse.PartitionData().aborted_transactions is not partition.aborted_transactions


def test_encode_request_rejects_unknown_versions() -> None:
    with pytest.raises(ValueError):
        encode_request(0, 13, 1, None, ProduceRequest())


def test_encoding_bad_values_is_a_value_error() -> None:
    from vdl_wire.codec import encode_message

    with pytest.raises(ValueError):
        encode_message(ProduceRequest, 8, ProduceRequest(acks=1 << 20))
    with pytest.raises(ValueError):
        encode_message(
            ProduceRequest, 8, ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)])
        )
    with pytest.raises(ValueError):
        encode_message(
            MetadataRequest, 0, MetadataRequest(topics=None)
        )  # v0 cannot say "all topics" with null


def test_readme_api_table_is_exactly_what_api_versions_advertises() -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("## Kafka APIs served", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| \w+ \| (\d+)(?:–(\d+))?", section, re.MULTILINE)
    listed = sorted((int(key), int(low), int(high or low)) for key, low, high in rows)
    assert listed == TABLE
