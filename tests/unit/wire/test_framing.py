"""FrameReader: however the byte stream is cut into reads, the same frames come out; a frame
longer than a read is read in place into a buffer of its length; limits are enforced before a
body is buffered; the read-ahead scratch is shared and holds nothing between reads."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vdl_wire.errors import DecodeError
from vdl_wire.framing import (
    EAGER_FRAME_BYTES,
    LONG_FRAME_BYTES,
    SCRATCH_BYTES,
    FrameReader,
    FrameTooLargeError,
    frame,
)


class Owned(bytearray):
    """The buffer type a caller asks long frames to be read into."""


def _stream(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def _read(reader: FrameReader, stream: bytes, cuts: list[int]) -> list[memoryview]:
    """As a transport reads: into the buffers handed out, each read cut at the next point of
    `cuts` or at the end of the buffer."""
    frames: list[memoryview] = []
    position = 0
    for cut in [*cuts, len(stream)]:
        while position < cut:
            buffer = reader.get_buffer()
            assert len(buffer) > 0
            size = min(len(buffer), cut - position)
            buffer[:size] = stream[position:position + size]
            reader.buffer_updated(size, frames.append)
            position += size
    return frames


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(bodies=st.lists(st.binary(max_size=300), max_size=12), cuts=st.lists(st.integers(0, 4000), max_size=20),
       big=st.integers(0, 2), long=st.integers(0, 2), order=st.randoms(use_true_random=False))
def test_any_cut_of_reads_gives_the_same_frames(bodies: list[bytes], cuts: list[int], big: int, long: int,
                                                order) -> None:  # noqa: ANN001 - hypothesis' Random
    bodies = (bodies + [bytes([i]) * (SCRATCH_BYTES + 1000 + i) for i in range(big)]  # longer than a read
              + [bytes([i]) * (LONG_FRAME_BYTES + i) for i in range(long)])  # a read holds it
    order.shuffle(bodies)
    stream = _stream(bodies)
    reader = FrameReader(1 << 20)
    assert [bytes(f) for f in _read(reader, stream, sorted({min(c, len(stream)) for c in cuts}))] == bodies
    assert reader.buffered_bytes == 0


def test_readers_sharing_the_scratch_keep_their_partial_frames_apart() -> None:
    a, b = FrameReader(1 << 20), FrameReader(1 << 20)
    stream_a, stream_b = _stream([b"alpha" * 20, b"x"]), _stream([b"beta" * 30, b"y"])
    out_a: list[bytes] = []
    out_b: list[bytes] = []
    # Interleaved reads of both streams, one to three bytes at a time: a split size prefix, a
    # partial body, whole frames.
    for position in range(0, max(len(stream_a), len(stream_b)), 3):
        for reader, stream, out in ((a, stream_a, out_a), (b, stream_b, out_b)):
            out += [bytes(f) for f in reader.feed(stream[position:position + 3])]
    assert out_a == [b"alpha" * 20, b"x"] and out_b == [b"beta" * 30, b"y"]


def test_a_long_frame_is_read_in_place_and_a_small_one_copied_into_its_own_bytes() -> None:
    reader = FrameReader(1 << 20, Owned)
    long_body = b"b" * (SCRATCH_BYTES * 2)
    frames = _read(reader, _stream([b"a" * 10, long_body, b"c" * 5, b"d" * 7, b"e" * 3]), [30])
    assert [bytes(f) for f in frames] == [b"a" * 10, long_body, b"c" * 5, b"d" * 7, b"e" * 3]
    assert type(frames[0].obj) is bytes and len(frames[0].obj) == 10
    # After its first read, its bytes went straight into it: the buffers handed out were its own.
    assert type(frames[1].obj) is Owned and len(frames[1].obj) == len(long_body)
    # After a long frame the next size prefix is read alone, and the body in place; after that
    # short one, reads go to the scratch again and short frames are copied out of it.
    assert type(frames[2].obj) is Owned and len(frames[2].obj) == 5
    assert type(frames[3].obj) is bytes and type(frames[4].obj) is bytes
    partial = FrameReader(1 << 20, Owned)
    _read(partial, _stream([long_body])[:100_000], [10])
    assert type(partial.get_buffer().obj) is Owned  # the next read lands in the frame
    assert partial.buffered_bytes == 100_000 - 4


def test_after_a_long_frame_the_next_one_is_read_into_its_own_buffer_from_its_first_byte() -> None:
    """Replication's frames, one long frame after another: no byte of a body goes through the
    scratch (a read there would hold most of it, to be copied out)."""
    reader = FrameReader(1 << 20, Owned)
    bodies = [b"a" * LONG_FRAME_BYTES, b"b" * (LONG_FRAME_BYTES + 1), b"c" * SCRATCH_BYTES, b"d"]
    stream = _stream(bodies)
    frames = _read(reader, stream, [LONG_FRAME_BYTES + 4])
    assert [bytes(f) for f in frames] == bodies
    assert type(frames[0].obj) is bytes  # the first came whole in a read into the scratch
    assert [type(f.obj) for f in frames[1:]] == [Owned, Owned, Owned]
    assert len(reader.get_buffer()) > 4  # after a short frame: reads into the scratch again
    split = FrameReader(1 << 20, Owned)
    _read(split, stream[:LONG_FRAME_BYTES + 4 + 1], [LONG_FRAME_BYTES + 4])  # a prefix split over reads
    assert len(split.get_buffer()) == 3


def test_a_size_prefix_alone_does_not_allocate_the_whole_frame() -> None:
    reader = FrameReader(1 << 30, Owned)
    reader.feed(struct.pack(">i", 1 << 30) + b"abc")
    assert len(reader.get_buffer()) == EAGER_FRAME_BYTES - 3
    assert reader.buffered_bytes == 3


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(size=st.integers(1, 200), cuts=st.lists(st.integers(0, 220), max_size=8))
def test_a_frame_longer_than_the_eager_allocation_is_joined_once(size: int, cuts: list[int]) -> None:
    body = bytes(range(256)) * size
    stream = _stream([b"a", body, b"z"])
    # The first read ends inside the long body: the rest goes in place, 64 bytes at most ahead.
    frames = _read(FrameReader(1 << 20, Owned, eager_bytes=64), stream,
                   sorted({10} | {min(c, len(stream)) for c in cuts}))
    assert [bytes(f) for f in frames] == [b"a", body, b"z"]
    assert type(frames[1].obj) is Owned and len(frames[1].obj) == len(body)


def test_over_limit_raises_before_buffering_the_body() -> None:
    reader = FrameReader(10)
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(struct.pack(">i", 11))  # only the prefix has arrived
    assert info.value.size == 11 and info.value.limit == 10
    assert isinstance(info.value, DecodeError)


def test_over_limit_after_split_prefix_names_its_position() -> None:
    reader = FrameReader(10)
    assert reader.feed(_stream([b"abc"]) + b"\x00\x00") == [memoryview(b"abc")]
    assert reader.buffered_bytes == 2
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(b"\x10\x00")
    assert info.value.position == 7


def test_limit_is_inclusive() -> None:
    assert [bytes(f) for f in FrameReader(3).feed(_stream([b"abc"]))] == [b"abc"]


def test_negative_length_is_decode_error() -> None:
    with pytest.raises(DecodeError, match="negative frame size"):
        FrameReader(100).feed(struct.pack(">i", -1))


def test_empty_frames() -> None:
    assert [bytes(f) for f in FrameReader(100).feed(_stream([b"", b"z", b""]))] == [b"", b"z", b""]


def test_partial_frame_is_kept_until_complete() -> None:
    reader = FrameReader(100)
    data = _stream([b"abcdef"])
    assert reader.feed(data[:6]) == []
    assert reader.buffered_bytes == 2
    assert [bytes(f) for f in reader.feed(data[6:])] == [b"abcdef"]


def test_frames_handed_on_are_not_changed_by_later_reads() -> None:
    reader = FrameReader(100)
    first = reader.feed(_stream([b"xy"]))
    reader.feed(_stream([b"zz" * 40]))
    assert bytes(first[0]) == b"xy"


def test_frame_helper_prefixes_total_size() -> None:
    parts = frame([b"ab", memoryview(b"cde")])
    assert b"".join(bytes(p) for p in parts) == struct.pack(">i", 5) + b"abcde"


def test_the_frames_before_a_bad_size_are_handed_on_first() -> None:
    frames: list[bytes] = []
    reader = FrameReader(10)
    buffer = reader.get_buffer()
    data = _stream([b"ok", b"z" * 11])
    buffer[:len(data)] = data
    with pytest.raises(FrameTooLargeError):
        reader.buffer_updated(len(data), lambda body: frames.append(bytes(body)))
    assert frames == [b"ok"]
