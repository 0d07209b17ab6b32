"""ReadWatermark: a plain TCP socket's SO_RCVLOWAT follows what its FrameReader awaits -- the
rest of a long frame's body, capped -- and is back at 1 once a frame is whole, so the kernel wakes
the reader once per long body and at the first byte of whatever comes next."""

from __future__ import annotations

import fcntl
import select
import socket
import struct
import termios
from collections.abc import Iterator

import pytest

from vdl_wire import framing
from vdl_wire.framing import WATERMARK_CAP_BYTES, FrameReader, ReadWatermark

TIER = "component"  # real sockets in this process


class Recorder:
    def __init__(self, refuse: bool = False) -> None:
        self.marks: list[int] = []
        self.refuse = refuse

    def setsockopt(self, level: int, option: int, value: int, /) -> None:
        assert (level, option) == (socket.SOL_SOCKET, socket.SO_RCVLOWAT)
        self.marks.append(value)
        if self.refuse:
            raise OSError("not here")


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _read_into(reader: FrameReader, watermark: ReadWatermark, data: bytes, frames: list[memoryview]) -> None:
    """`data` as one read (it fits the buffer handed out), then the watermark's update."""
    buffer = reader.get_buffer()
    assert len(data) <= len(buffer)
    buffer[:len(data)] = data
    reader.buffer_updated(len(data), frames.append)
    watermark.update(reader)


def test_the_mark_follows_a_long_body_capped_and_is_back_at_one_when_it_is_whole() -> None:
    sock = Recorder()
    reader, watermark, frames = FrameReader(1 << 30), ReadWatermark(sock), []
    body = bytes(range(256)) * 4096  # 1 MiB
    stream = _frame(body)
    _read_into(reader, watermark, stream[:1004], frames)  # the size prefix and 1,000 body bytes
    assert reader.awaited_bytes == len(body) - 1000
    _read_into(reader, watermark, stream[1004:700_004], frames)
    assert reader.awaited_bytes == len(body) - 700_000
    _read_into(reader, watermark, stream[700_004:], frames)
    assert [bytes(f) for f in frames] == [body]
    assert reader.awaited_bytes == 0
    assert sock.marks == [WATERMARK_CAP_BYTES, len(body) - 700_000, 1]
    # After a long frame the next size prefix is read alone; then its body is awaited whole.
    _read_into(reader, watermark, _frame(b"s" * 100)[:4], frames)
    _read_into(reader, watermark, b"s" * 100, frames)
    assert bytes(frames[-1]) == b"s" * 100
    assert sock.marks == [WATERMARK_CAP_BYTES, len(body) - 700_000, 1, 100, 1]
    # Small frames read whole from the read-ahead ask for nothing.
    _read_into(reader, watermark, _frame(b"a") + _frame(b"b"), frames)
    assert [bytes(f) for f in frames[-2:]] == [b"a", b"b"]
    assert sock.marks[-1] == 1 and len(sock.marks) == 5


def test_a_refused_option_is_not_asked_again() -> None:
    sock = Recorder(refuse=True)
    reader, watermark, frames = FrameReader(1 << 30), ReadWatermark(sock), []
    stream = _frame(b"x" * 200_000) * 2
    _read_into(reader, watermark, stream[:1000], frames)
    _read_into(reader, watermark, stream[1000:200_004], frames)
    _read_into(reader, watermark, stream[200_004:200_008], frames)  # after a long frame: its size alone
    _read_into(reader, watermark, stream[200_008:201_000], frames)
    assert len(frames) == 1 and sock.marks == [200_000 - 996]


def test_nothing_is_asked_where_the_kernel_does_not_support_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "WATERMARK_SUPPORTED", False)
    sock = Recorder()
    reader, watermark, frames = FrameReader(1 << 30), ReadWatermark(sock), []
    _read_into(reader, watermark, _frame(b"x" * 200_000)[:1000], frames)
    assert sock.marks == []


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
    with sender, receiver:
        receiver.setblocking(False)
        yield sender, receiver


def _queued(sock: socket.socket) -> int:
    return struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0" * 4))[0]


def _readable(sock: socket.socket, timeout_s: float) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def _recv(reader: FrameReader, watermark: ReadWatermark, sock: socket.socket, frames: list[memoryview]) -> None:
    got = sock.recv_into(reader.get_buffer())
    assert got > 0
    reader.buffer_updated(got, frames.append)
    watermark.update(reader)


@pytest.mark.skipif(not framing.WATERMARK_SUPPORTED, reason="SO_RCVLOWAT is only asked for on Linux 4.18 and later")
def test_the_kernel_holds_the_wake_up_until_the_body_is_in_then_wakes_at_the_next_byte(
        tcp_pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = tcp_pair
    reader, watermark, frames = FrameReader(1 << 30), ReadWatermark(receiver), []
    body = b"b" * 300_000
    stream = _frame(body)
    sender.sendall(stream[:10_004])
    assert _readable(receiver, 5)
    _recv(reader, watermark, receiver, frames)
    while reader.awaited_bytes != len(body) - 10_000:  # what the first read did not take
        _recv(reader, watermark, receiver, frames)
    assert receiver.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == len(body) - 10_000
    sender.sendall(stream[10_004:200_004])
    assert _queued(receiver) == 190_000  # there, but fewer bytes than the mark: no wake-up
    assert not _readable(receiver, 0.2)
    sender.sendall(stream[200_004:])
    assert _readable(receiver, 5)
    while not frames:
        _recv(reader, watermark, receiver, frames)
    assert bytes(frames[0]) == body
    assert receiver.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    sender.sendall(b"\0")  # one byte of the next size prefix wakes the reader
    assert _readable(receiver, 5)
