"""FrameSplitter: any chunking yields the same frames; limits are enforced before buffering."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vdl_wire.errors import DecodeError
from vdl_wire.framing import FrameSplitter, FrameTooLargeError, frame


def _stream(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.lists(st.integers(1, 17), min_size=1, max_size=50))
def test_any_chunking_yields_the_same_frames(bodies: list[bytes], cuts: list[int]) -> None:
    data = _stream(bodies)
    splitter = FrameSplitter(1024)
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        size = cuts[i % len(cuts)]
        out += [bytes(f) for f in splitter.feed(data[pos : pos + size])]
        pos += size
        i += 1
    assert out == bodies
    assert splitter.buffered_bytes == 0


def test_whole_frames_in_one_chunk_are_zero_copy() -> None:
    data = _stream([b"hello", b"world"])
    frames = FrameSplitter(100).feed(data)
    assert [bytes(f) for f in frames] == [b"hello", b"world"]
    assert all(f.obj is data for f in frames)


def test_over_limit_raises_before_buffering_the_body() -> None:
    splitter = FrameSplitter(10)
    with pytest.raises(FrameTooLargeError) as info:
        splitter.feed(struct.pack(">i", 11))  # only the prefix has arrived
    assert info.value.size == 11 and info.value.limit == 10
    assert isinstance(info.value, DecodeError)
    assert splitter.buffered_bytes == 0


def test_over_limit_after_split_prefix() -> None:
    splitter = FrameSplitter(10)
    assert splitter.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLargeError):
        splitter.feed(b"\x10\x00")


def test_limit_is_inclusive() -> None:
    assert [bytes(f) for f in FrameSplitter(3).feed(_stream([b"abc"]))] == [b"abc"]


def test_negative_length_is_decode_error() -> None:
    with pytest.raises(DecodeError, match="negative frame size"):
        FrameSplitter(100).feed(struct.pack(">i", -1))


def test_partial_frame_is_kept_until_complete() -> None:
    splitter = FrameSplitter(100)
    data = _stream([b"abcdef"])
    assert splitter.feed(data[:6]) == []
    assert splitter.buffered_bytes == 2
    assert [bytes(f) for f in splitter.feed(data[6:])] == [b"abcdef"]


def test_mutable_chunks_are_copied() -> None:
    chunk = bytearray(_stream([b"xy"]))
    frames = FrameSplitter(100).feed(chunk)
    chunk[4:6] = b"zz"
    assert bytes(frames[0]) == b"xy"


def test_frame_helper_prefixes_total_size() -> None:
    parts = frame([b"ab", memoryview(b"cde")])
    assert b"".join(bytes(p) for p in parts) == struct.pack(">i", 5) + b"abcde"
