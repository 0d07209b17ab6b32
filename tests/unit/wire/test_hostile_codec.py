"""Hostile input: every malformed frame is a DecodeError; nothing else escapes, nothing hangs,
and no allocation grows beyond the input's size."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vdl_wire.api import decode_request, decode_response, encode_request
from vdl_wire.codec import decode_message, encode_message
from vdl_wire.errors import DecodeError
from vdl_wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    ProduceRequest,
)
from vdl_wire.primitives import read_string, read_uvarint

try:
    from .codec_strategies import all_message_versions, sample_value
except ImportError:  # rootdir-style test import (no package)
    from codec_strategies import all_message_versions, sample_value

CASES = all_message_versions()
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]
FAST = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _join(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_every_truncation_is_a_decode_error(cls: type, version: int) -> None:
    data = _join(encode_message(cls, version, sample_value(cls, version)))
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode_message(cls, version, data[:cut])


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_mutated_bytes_decode_or_raise_decode_error(cls: type, version: int) -> None:
    data = _join(encode_message(cls, version, sample_value(cls, version)))

    @FAST
    @given(st.integers(0, max(0, len(data) - 1)), st.integers(0, 255), st.integers(0, 3))
    def check(index: int, byte: int, extra_cut: int) -> None:
        mutated = bytearray(data)
        if mutated:
            mutated[index] = byte
        mutated = mutated[: len(mutated) - extra_cut]
        try:
            decode_message(cls, version, bytes(mutated))
        except DecodeError:
            pass

    check()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.binary(max_size=64))
def test_garbage_requests_only_raise_decode_error(frame: bytes) -> None:
    try:
        decode_request(frame)
    except DecodeError as exc:
        assert "byte" in str(exc) or exc.position < 0 or "unsupported" in str(exc)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.sampled_from(CASES), st.binary(max_size=48))
def test_garbage_bodies_only_raise_decode_error(case, body: bytes) -> None:
    cls, version = case
    try:
        decode_message(cls, version, body)
    except DecodeError:
        pass


def _produce_v3_prefix() -> bytes:
    # transactional_id null, acks -1, timeout 1000
    return struct.pack(">hhi", -1, -1, 1000)


@pytest.mark.parametrize("count", [2**31 - 1, 10**6, 5])
def test_array_count_larger_than_remaining_bytes(count: int) -> None:
    data = _produce_v3_prefix() + struct.pack(">i", count) + b"\x00\x01t"
    with pytest.raises(DecodeError, match="declares"):
        decode_message(ProduceRequest, 3, data)


@pytest.mark.parametrize("length", [-2, -32768])
def test_negative_string_lengths(length: int) -> None:
    data = _produce_v3_prefix() + struct.pack(">i", 1) + struct.pack(">h", length) + b"\x00" * 8
    with pytest.raises(DecodeError, match="invalid string length"):
        decode_message(ProduceRequest, 3, data)


def test_null_for_non_nullable_string() -> None:
    data = _produce_v3_prefix() + struct.pack(">i", 1) + struct.pack(">h", -1) + b"\x00" * 8
    with pytest.raises(DecodeError):
        decode_message(ProduceRequest, 3, data)


def test_negative_array_count_for_non_nullable_array() -> None:
    with pytest.raises(DecodeError, match="invalid array length"):
        decode_message(ProduceRequest, 3, _produce_v3_prefix() + struct.pack(">i", -1))
    # Metadata v0 topics are not nullable; v1+ they are.
    with pytest.raises(DecodeError):
        decode_message(MetadataRequest, 0, struct.pack(">i", -1))
    assert decode_message(MetadataRequest, 1, struct.pack(">i", -1))[0].topics is None


@pytest.mark.parametrize("size", [2**31 - 1, 1 << 20, 3])
def test_records_size_beyond_input(size: int) -> None:
    data = (
        _produce_v3_prefix()
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + struct.pack(">i", size)
        + b"ab"
    )
    with pytest.raises(DecodeError, match="truncated records"):
        decode_message(ProduceRequest, 3, data)


def test_records_invalid_negative_size() -> None:
    data = _produce_v3_prefix() + struct.pack(">ihsii", 1, 1, b"t", 1, 0) + struct.pack(">i", -7)
    with pytest.raises(DecodeError, match="invalid records length"):
        decode_message(ProduceRequest, 3, data)


def test_string_length_beyond_input() -> None:
    with pytest.raises(DecodeError, match="truncated string"):
        read_string(memoryview(struct.pack(">h", 30000) + b"abc"), 0)


def test_invalid_utf8_is_decode_error() -> None:
    with pytest.raises(DecodeError, match="UTF-8"):
        read_string(memoryview(struct.pack(">h", 2) + b"\xff\xfe"), 0)


def test_overlong_varint() -> None:
    with pytest.raises(DecodeError, match="varint longer"):
        read_uvarint(memoryview(b"\xff" * 20), 0)
    with pytest.raises(DecodeError, match="truncated varint"):
        read_uvarint(memoryview(b"\xff\xff"), 0)


def test_compact_array_huge_count_in_flexible_version() -> None:
    # ApiVersionsResponse v3: error_code, then compact array count as a 5-byte varint (~2**32).
    data = struct.pack(">h", 0) + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(DecodeError, match="declares"):
        decode_message(ApiVersionsResponse, 3, data)


def test_tagged_field_hostile_sizes() -> None:
    body = struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0)  # no api keys, throttle 0
    # one tagged field, tag 1 (finalized_features_epoch, int64) with size 200 but 3 bytes left
    with pytest.raises(DecodeError, match="truncated tagged field"):
        decode_message(ApiVersionsResponse, 3, body + b"\x01\x01\xc8\x01abc")
    # size 2 for an int64: the reader is bounded by the tagged field's size
    with pytest.raises(DecodeError):
        decode_message(ApiVersionsResponse, 3, body + b"\x01\x01\x02ab")
    # size 9 for an int64: leftover bytes inside the field
    with pytest.raises(DecodeError, match="tagged field"):
        decode_message(ApiVersionsResponse, 3, body + b"\x01\x01\x09" + b"\x00" * 9)
    # a huge tag count
    with pytest.raises(DecodeError, match="tagged fields declared"):
        decode_message(ApiVersionsResponse, 3, body + b"\xff\xff\xff\x7f")
    # unknown tags are skipped
    value, end = decode_message(ApiVersionsResponse, 3, body + b"\x01\x63\x02zz", exact=True)
    assert value.finalized_features_epoch == -1


def test_unsupported_header_is_not_decoded_blindly() -> None:
    with pytest.raises(DecodeError):
        decode_request(b"\x00\x03\x00")  # shorter than the fixed header part


def _peak_allocation(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    except DecodeError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize(
    "frame",
    [
        # Produce v3 request with a 2**31-1 topic count
        struct.pack(">hhih", 0, 3, 1, -1) + _produce_v3_prefix() + struct.pack(">i", 2**31 - 1),
        # Metadata v1 with a 2**31-1 topic count
        struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1) + b"\x00" * 16,
        # Fetch response-like huge records size inside a request frame
        struct.pack(">hhih", 0, 3, 1, -1)
        + _produce_v3_prefix()
        + struct.pack(">ihsiii", 1, 1, b"t", 1, 0, 2**31 - 1),
    ],
)
def test_no_allocation_beyond_input(frame: bytes) -> None:
    peak = _peak_allocation(lambda: decode_request(frame))
    assert peak < 64 * 1024


def test_huge_declared_sizes_in_responses() -> None:
    frame = struct.pack(">i", 7) + struct.pack(">ii", 0, 2**31 - 1)  # Fetch v1 response header + huge count
    peak = _peak_allocation(lambda: decode_response(1, 1, frame))
    assert peak < 64 * 1024
    with pytest.raises(DecodeError):
        decode_response(1, 1, frame)
    frame = struct.pack(">i", 7) + struct.pack(">i", 0) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(DecodeError):
        decode_response(3, 0, frame)


def test_exact_rejects_trailing_bytes_and_decode_request_ignores_them() -> None:
    frame = _join(encode_request(18, 0, 5, "c", ApiVersionsRequest()))
    header, _ = decode_request(frame[4:] + b"junk")
    assert header.correlation_id == 5
    with pytest.raises(DecodeError, match="trailing"):
        decode_message(MetadataRequest, 1, struct.pack(">i", 0) + b"x", exact=True)
