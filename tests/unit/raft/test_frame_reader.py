"""The Raft connection's frame reader (transport._FrameProtocol, a buffered protocol): however the
byte stream is cut into reads, the same frame bodies come out, in order; a frame longer than a
read is read in place into a FrozenBuffer of its length (no copy of what comes after its first
read; after a long frame, no copy at all), a small one read whole is copied into bytes of its own -- either way a buffer nothing
changes after, which the log keeps without a copy; an oversized length ends the connection
with a WireError."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.buffered_reads import read_into
from vdl_broker.log import FrozenBuffer
from vdl_broker.raft.transport import _FrameProtocol
from vdl_broker.raft.wire import WireError


class _Inner(asyncio.Protocol):
    def __init__(self) -> None:
        self.lost: list[Exception | None] = []
        self.paused = 0

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)

    def pause_writing(self) -> None:
        self.paused += 1


def _reader(max_frame_bytes: int = 1 << 20) -> tuple[_FrameProtocol, list[memoryview], list[BaseException | None],
                                                     _Inner]:
    frames: list[memoryview] = []
    ends: list[BaseException | None] = []
    inner = _Inner()
    return _FrameProtocol(inner, max_frame_bytes, frames.append, ends.append), frames, ends, inner


def _stream(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(body)) + body for body in bodies)


@settings(max_examples=100, deadline=None)
@given(bodies=st.lists(st.binary(max_size=300), max_size=12), cuts=st.lists(st.integers(0, 4000), max_size=20))
def test_any_cut_of_the_stream_gives_the_same_frames(bodies: list[bytes], cuts: list[int]) -> None:
    stream = _stream(bodies)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    protocol, frames, ends, _ = _reader()
    for start, end in zip(points, points[1:], strict=False):
        protocol.data_received(stream[start:end])
    assert [bytes(f) for f in frames] == bodies
    assert ends == []


@settings(max_examples=100, deadline=None)
@given(bodies=st.lists(st.binary(max_size=300), max_size=12), cuts=st.lists(st.integers(0, 4000), max_size=20),
       big=st.integers(0, 3))
def test_any_cut_of_reads_into_its_buffers_gives_the_same_frames(bodies: list[bytes], cuts: list[int],
                                                                 big: int) -> None:
    bodies = bodies + [bytes([i]) * (200_000 + i) for i in range(big)]  # longer than the read-ahead
    stream = _stream(bodies)
    protocol, frames, ends, _ = _reader()
    read_into(protocol, stream, sorted({min(c, len(stream)) for c in cuts}))
    assert [bytes(f) for f in frames] == bodies
    assert ends == []


def test_a_long_frame_is_read_in_place_and_a_small_one_copied_into_its_own_bytes() -> None:
    protocol, frames, _, _ = _reader()
    long_body = b"b" * 300_000
    read = _stream([b"a" * 10, long_body, b"c" * 5])
    read_into(protocol, read, [30])  # the first whole, the second's first bytes, the rest
    assert [bytes(f) for f in frames] == [b"a" * 10, long_body, b"c" * 5]
    assert isinstance(frames[0].obj, bytes) and len(frames[0].obj) == 10
    assert isinstance(frames[1].obj, FrozenBuffer) and len(frames[1].obj) == len(long_body)
    # Its bytes after the first read went straight into it: the buffers handed out were its own.
    # After a long frame the next size prefix is read alone, and that frame's body in place.
    assert isinstance(frames[2].obj, FrozenBuffer) and len(frames[2].obj) == 5
    protocol2, frames2, _, _ = _reader()
    read_into(protocol2, _stream([long_body]), [10])
    assert len(protocol2.get_buffer(-1)) == 4  # done: the next size prefix alone, read ahead
    partial, _, _, _ = _reader()
    read_into(partial, _stream([long_body])[:100_000], [10])
    assert isinstance(partial.get_buffer(-1).obj, FrozenBuffer)  # the next read lands in the frame


def test_a_length_prefix_split_over_three_reads() -> None:
    protocol, frames, ends, _ = _reader()
    read = _stream([b"xyz", b""])
    for i in range(len(read)):
        protocol.data_received(read[i:i + 1])
    assert [bytes(f) for f in frames] == [b"xyz", b""]
    assert ends == []


def test_an_oversized_frame_ends_the_connection_and_nothing_is_read_after() -> None:
    protocol, frames, ends, _ = _reader(max_frame_bytes=100)
    protocol.data_received(_stream([b"ok", b"z" * 101, b"never"]))
    assert [bytes(f) for f in frames] == [b"ok"]
    assert len(ends) == 1 and isinstance(ends[0], WireError)
    protocol.data_received(_stream([b"later"]))
    assert [bytes(f) for f in frames] == [b"ok"] and len(ends) == 1


def test_a_failing_frame_handler_ends_the_connection() -> None:
    inner = _Inner()
    ends: list[BaseException | None] = []

    def handler(body: memoryview) -> None:
        raise WireError("bad", 0)

    protocol = _FrameProtocol(inner, 1 << 20, handler, ends.append)
    protocol.data_received(_stream([b"1", b"2"]))
    assert len(ends) == 1 and isinstance(ends[0], WireError)


def test_flow_control_and_loss_reach_the_streams_protocol() -> None:
    protocol, _, ends, inner = _reader()
    protocol.pause_writing()
    assert inner.paused == 1
    error = ConnectionResetError("gone")
    protocol.connection_lost(error)
    assert inner.lost == [error] and ends == [error]
    protocol.connection_lost(None)  # the end is reported once
    assert ends == [error]
