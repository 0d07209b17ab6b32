"""The Raft connection's frame reader (transport._FrameProtocol): however the byte stream is cut
into reads, the same frame bodies come out, in order; a frame that arrived whole in one read is
a slice of that read (no copy), one spread over reads is joined once into bytes (which the log
keeps without a copy); an oversized length ends the connection with a WireError."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_a_whole_frame_is_a_slice_of_the_read_and_a_split_one_joined_bytes() -> None:
    protocol, frames, _, _ = _reader()
    read = _stream([b"a" * 10, b"b" * 50])
    protocol.data_received(read[:30])  # the first whole, the second's first bytes
    protocol.data_received(read[30:])
    assert [bytes(f) for f in frames] == [b"a" * 10, b"b" * 50]
    assert frames[0].obj is not None and frames[0].readonly and isinstance(frames[0].obj, bytes)
    assert isinstance(frames[1].obj, bytes) and len(frames[1].obj) == 50  # its own bytes, the frame only


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
