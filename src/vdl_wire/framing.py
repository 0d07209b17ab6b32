"""Reading a byte stream's Kafka frames (int32 size prefix + body) into buffers of their own.

# Kafka protocol guide: "Common Request and Response Structure" (RequestOrResponse => Size Message).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
from collections.abc import Callable
from typing import Protocol

from .errors import DecodeError
from .primitives import Buffer, pack_i32

_SIZE = struct.Struct(">i")

# Bytes one read takes when no long frame is in progress (uvloop's own read size): the small
# frames of a read come out of it, copied; a frame longer than what a read holds gets a buffer of
# its own. One per thread (one event loop), shared by every reader on it (see FrameReader).
SCRATCH_BYTES = 256 << 10
EAGER_FRAME_BYTES = 4 << 20  # what a reader allocates ahead of a frame's bytes, by default
# A frame at least this long makes the reader read the next frame's size prefix alone, then its
# body straight into its own buffer: where frames are long (replication, large produce batches)
# a read into the scratch would hold most of one, to be copied out byte by byte. One more read
# per frame costs less than copying this many bytes.
LONG_FRAME_BYTES = 64 << 10
# The most a ReadWatermark asks the kernel to gather before it wakes the reader: a longer body
# comes in reads of this size.
WATERMARK_CAP_BYTES = 512 << 10
_scratch = threading.local()


def _thread_scratch() -> memoryview:
    view: memoryview | None = getattr(_scratch, "view", None)
    if view is None:
        view = _scratch.view = memoryview(bytearray(SCRATCH_BYTES))
    return view


class FrameTooLargeError(DecodeError):
    """A frame's size prefix exceeds the limit; raised before any of its body is buffered."""

    def __init__(self, size: int, limit: int, position: int = 0) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}", position)
        self.size = size
        self.limit = limit


class FrameReader:
    """Incremental frame reader for a buffered protocol (asyncio.BufferedProtocol): the transport
    reads into the buffer `get_buffer` hands out, and `buffer_updated(n, on_frame)` hands on the
    frame bodies those n bytes completed.

    The body of a frame longer than what one read holds is read by the kernel straight into a
    buffer of exactly its length (`new_buffer`) and handed on as it is: no copy in user space,
    where reading into fresh bytes per read and joining them cost an allocation and a copy of
    every byte. Frames a read holds whole are copied out of the read-ahead scratch into bytes of
    their own (they are small). Either way nothing changes a body after it is handed on, so
    callers may keep views into it.

    A buffer is allocated as its bytes arrive, at most `eager_bytes` ahead of them: a size
    prefix alone (4 bytes from anyone) does not make the reader hold the frame's whole length. A
    body longer than that is read into buffers of that size and joined once at its end.

    The scratch is shared by every reader of a thread: between a get_buffer and its
    buffer_updated the event loop reads nothing else, and a reader leaves nothing in the scratch
    when buffer_updated returns (a size prefix split over reads, at most 3 bytes, is kept apart).
    So an idle connection holds no buffer.

    After a frame of LONG_FRAME_BYTES or more the next read takes only the next frame's size
    prefix: its body then goes to its own buffer from its first byte, where a read into the
    scratch would have taken much of it, to be copied."""

    __slots__ = ("max_frame_bytes", "_new_buffer", "_eager", "_prefix", "_size", "_parts", "_frame", "_filled",
                 "_consumed", "_long")

    def __init__(self, max_frame_bytes: int, new_buffer: Callable[[int], bytearray] = bytearray,
                 eager_bytes: int = EAGER_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._new_buffer = new_buffer
        self._eager = eager_bytes
        self._prefix = b""  # the first bytes of a size prefix split over reads
        self._size = 0  # of the body being read in place
        self._parts: list[memoryview] = []  # its buffers filled so far (a body over eager_bytes)
        self._frame: memoryview | None = None  # the buffer being filled
        self._filled = 0  # its bytes read so far
        self._consumed = 0  # stream position, for error messages
        self._long = False  # the last frame was long: read the next one's size prefix alone

    @property
    def awaited_bytes(self) -> int:
        """What the buffer being filled in place still awaits, all of which the next read may
        take (0: no frame body is being read in place)."""
        return 0 if self._frame is None else len(self._frame) - self._filled

    @property
    def buffered_bytes(self) -> int:
        return len(self._prefix) + sum(len(p) for p in self._parts) + self._filled

    def get_buffer(self) -> memoryview:
        """Where the next read goes (never empty)."""
        if self._frame is not None:
            return self._frame[self._filled:]
        scratch = _thread_scratch()
        held = len(self._prefix)
        scratch[:held] = self._prefix
        return scratch[held:_SIZE.size] if self._long else scratch[held:]

    def buffer_updated(self, nbytes: int, on_frame: Callable[[memoryview], None]) -> None:
        """`nbytes` were read into the last buffer handed out: each body they completed goes to
        `on_frame`, in order; a bad size prefix raises after the bodies before it."""
        if self._frame is None:
            self._split(_thread_scratch(), len(self._prefix) + nbytes, on_frame)
            return
        self._filled += nbytes
        self._consumed += nbytes
        if self._filled < len(self._frame):
            return
        self._parts.append(self._frame)
        have = sum(len(p) for p in self._parts)
        if have < self._size:
            self._frame, self._filled = memoryview(self._new_buffer(min(self._size - have, self._eager))), 0
            return
        body = self._parts[0] if len(self._parts) == 1 else self._join()
        self._parts, self._frame, self._filled = [], None, 0
        self._long = self._size >= LONG_FRAME_BYTES
        on_frame(body)

    def _join(self) -> memoryview:
        body = memoryview(self._new_buffer(self._size))
        position = 0
        for part in self._parts:
            body[position:position + len(part)] = part
            position += len(part)
        return body

    def feed(self, data: Buffer) -> list[memoryview]:
        """Bytes read elsewhere, as if read into our buffers: the bodies they completed."""
        view = memoryview(data).cast("B")
        frames: list[memoryview] = []
        while view:
            target = self.get_buffer()
            taken = min(len(target), len(view))
            target[:taken] = view[:taken]
            view = view[taken:]
            self.buffer_updated(taken, frames.append)
        return frames

    def _split(self, scratch: memoryview, held: int, on_frame: Callable[[memoryview], None]) -> None:
        """The frames the scratch holds whole, copied out; a partial one continues in place."""
        position = 0
        self._prefix = b""
        while held - position >= _SIZE.size:
            (size,) = _SIZE.unpack_from(scratch, position)
            at = self._consumed + position
            if size < 0:
                raise DecodeError(f"negative frame size {size}", at)
            if size > self.max_frame_bytes:
                raise FrameTooLargeError(size, self.max_frame_bytes, at)
            start = position + _SIZE.size
            if held - start < size:
                frame = memoryview(self._new_buffer(min(size, max(self._eager, held - start))))
                frame[:held - start] = scratch[start:held]
                self._size, self._frame, self._filled = size, frame, held - start
                self._consumed += held
                return
            position = start + size
            self._long = size >= LONG_FRAME_BYTES
            # Copied out: the handler may keep the body, and the scratch is everyone's.
            on_frame(memoryview(bytes(scratch[start:position])))
        self._prefix = bytes(scratch[position:held])
        self._consumed += position


class SocketOptions(Protocol):
    def setsockopt(self, level: int, option: int, value: int, /) -> None: ...


def _kernel_release() -> tuple[int, ...]:
    numbers = []
    for part in os.uname().release.split("-")[0].split(".")[:2]:
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


# Linux grows a socket's receive buffer to hold the low-water mark asked for since 4.18
# (tcp_set_rcvlowat); before it, a mark above what the buffer holds could wait for bytes the
# sender cannot send. Elsewhere event loops poll differently: no mark.
WATERMARK_SUPPORTED = sys.platform == "linux" and _kernel_release() >= (4, 18)


class ReadWatermark:
    """Keeps a plain TCP socket's receive low-water mark (SO_RCVLOWAT) at what its FrameReader
    awaits, up to WATERMARK_CAP_BYTES, so that the event loop is woken once a long frame's body is
    in rather than at every segment that arrives (a 700 KB replication frame on loopback took ~6
    wake-ups and reads), and at the first byte between frames, as without it. Update it after
    every read: a mark left at a long frame's rest would keep a short frame after it waiting for
    bytes that may never come. Not for TLS (the socket's bytes are records, not the reader's).
    Where the option is refused it stops asking.
    # Linux: socket(7) SO_RCVLOWAT -- epoll honours it; a non-blocking read returns what is there."""

    __slots__ = ("_sock", "_mark")

    def __init__(self, sock: SocketOptions | None) -> None:
        self._sock = sock if WATERMARK_SUPPORTED else None
        self._mark = 1  # the kernel's default

    def update(self, reader: FrameReader) -> None:
        if self._sock is None:
            return
        mark = max(1, min(reader.awaited_bytes, WATERMARK_CAP_BYTES))
        if mark == self._mark:
            return
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, mark)
        except OSError:
            self._sock = None  # reads go on waking at the first byte
            return
        self._mark = mark


def frame(parts: list[Buffer]) -> list[Buffer]:
    """Prefix already-encoded parts with their total size."""
    total = sum(b.nbytes if isinstance(b, memoryview) else len(b) for b in parts)
    return [pack_i32(total), *parts]
