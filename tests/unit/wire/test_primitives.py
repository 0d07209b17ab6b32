"""Primitive readers/writers: known vectors and round trips."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vdl_wire import primitives as p
from vdl_wire.errors import DecodeError, ErrorCode


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_vectors(value: int, encoded: bytes) -> None:
    out = bytearray()
    p.write_uvarint(out, value)
    assert bytes(out) == encoded
    assert p.read_uvarint(memoryview(encoded), 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"), [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")]
)
def test_zigzag_varint_vectors(value: int, encoded: bytes) -> None:
    out = bytearray()
    p.write_varint(out, value)
    assert bytes(out) == encoded
    assert p.read_varint(memoryview(encoded), 0) == (value, len(encoded))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    p.write_varint(out, value)
    assert p.read_varint(memoryview(bytes(out)), 0) == (value, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    out = bytearray()
    p.write_varlong(out, value)
    assert p.read_varlong(memoryview(bytes(out)), 0) == (value, len(out))


@given(st.none() | st.text(max_size=40), st.booleans())
def test_string_round_trip(value: str | None, compact: bool) -> None:
    out = bytearray()
    p.write_string(out, value, compact=compact, nullable=True)
    assert p.read_string(memoryview(bytes(out)), 0, compact=compact, nullable=True) == (value, len(out))


@given(st.none() | st.binary(max_size=40), st.booleans())
def test_bytes_round_trip(value: bytes | None, compact: bool) -> None:
    out = bytearray()
    p.write_bytes(out, value, compact=compact, nullable=True)
    assert p.read_bytes(memoryview(bytes(out)), 0, compact=compact, nullable=True) == (value, len(out))


def test_string_encodings() -> None:
    out = bytearray()
    p.write_string(out, "ab")
    assert bytes(out) == b"\x00\x02ab"
    out = bytearray()
    p.write_string(out, "ab", compact=True)
    assert bytes(out) == b"\x03ab"
    out = bytearray()
    p.write_string(out, None, compact=True, nullable=True)
    assert bytes(out) == b"\x00"
    with pytest.raises(ValueError):
        p.write_string(bytearray(), None)


def test_records_are_zero_copy_slices() -> None:
    data = b"\x00\x00\x00\x03abcXYZ"
    view, end = p.read_records(memoryview(data), 0)
    assert bytes(view) == b"abc" and end == 7
    assert view.obj is data
    assert p.read_records(memoryview(b"\xff\xff\xff\xff"), 0) == (None, 4)


def test_fixed_width_truncation() -> None:
    for reader in (p.read_int8, p.read_int16, p.read_int32, p.read_int64, p.read_uuid, p.read_bool):
        with pytest.raises(DecodeError, match="truncated"):
            reader(memoryview(b""), 0)


def test_uuid() -> None:
    u = uuid.uuid4()
    assert p.read_uuid(memoryview(u.bytes), 0) == (u, 16)


def test_decode_error_says_where() -> None:
    err = DecodeError("bad thing", 17)
    assert str(err) == "bad thing (at byte 17)"
    assert err.position == 17 and isinstance(err, ValueError)


def test_error_codes() -> None:
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and not ErrorCode.UNSUPPORTED_VERSION.retriable
    assert ErrorCode.DUPLICATE_SEQUENCE_NUMBER == 46
    assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert ErrorCode.REQUEST_TIMED_OUT.retriable and ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.retriable
    assert not ErrorCode.OFFSET_OUT_OF_RANGE.retriable
    assert ErrorCode.from_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    codes = [e.value for e in ErrorCode]
    assert codes == list(range(-1, len(codes) - 1))  # the table has no gaps


def test_error_codes_agree_with_kafka_python() -> None:
    import kafka.errors as ke

    for name in dir(ke):
        cls = getattr(ke, name)
        if isinstance(cls, type) and issubclass(cls, ke.BrokerResponseError) and cls.errno is not None:
            if cls.errno in (-1, 0):
                continue
            ours = ErrorCode(cls.errno)
            # kafka-python's flag differs from Kafka's RetriableException for a few codes.
            if cls.errno not in (2, 9, 84, 108):
                assert ours.retriable == cls.retriable, (ours, cls)
