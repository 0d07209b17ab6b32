"""Splitting a byte stream into Kafka frames (int32 size prefix + body).

# Kafka protocol guide: "Common Request and Response Structure" (RequestOrResponse => Size Message).
"""

from __future__ import annotations

from .errors import DecodeError
from .primitives import Buffer, pack_i32, unpack_i32


class FrameTooLargeError(DecodeError):
    """A frame's size prefix exceeds the limit; raised before any of its body is buffered."""

    def __init__(self, size: int, limit: int, position: int = 0) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}", position)
        self.size = size
        self.limit = limit


class FrameSplitter:
    """Incremental splitter: `feed(chunk)` returns the whole frame bodies completed by `chunk`.

    Frames wholly inside one chunk are zero-copy memoryview slices of that chunk; a frame spread
    over chunks is joined once. Chunks must not be mutated after feeding (pass bytes).
    """

    __slots__ = ("max_frame_bytes", "_head", "_need", "_parts", "_have", "_consumed")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._head = bytearray()  # partial size prefix
        self._need = -1  # body size of the frame in progress, -1 while reading the prefix
        self._parts: list[memoryview] = []
        self._have = 0
        self._consumed = 0  # stream position, for error messages

    @property
    def buffered_bytes(self) -> int:
        return len(self._head) + self._have

    def feed(self, data: Buffer) -> list[memoryview]:
        if not isinstance(data, bytes):
            data = bytes(data)  # we keep slices; a caller's reusable buffer must not back them
        view = memoryview(data)
        frames: list[memoryview] = []
        pos = 0
        n = len(view)
        while pos < n:
            if self._need < 0:
                if not self._head and n - pos >= 4:
                    size = unpack_i32(view, pos)[0]
                    pos += 4
                else:
                    take = min(4 - len(self._head), n - pos)
                    self._head += view[pos : pos + take]
                    pos += take
                    if len(self._head) < 4:
                        break
                    size = unpack_i32(self._head, 0)[0]
                    self._head.clear()
                self._start_frame(size, self._consumed + pos - 4)
                if size == 0:
                    frames.append(memoryview(b""))
                    self._need = -1
                continue
            missing = self._need - self._have
            if not self._parts and n - pos >= missing:
                frames.append(view[pos : pos + missing])  # zero copy
                pos += missing
                self._need = -1
                continue
            take = min(missing, n - pos)
            self._parts.append(view[pos : pos + take])
            self._have += take
            pos += take
            if self._have == self._need:
                frames.append(memoryview(b"".join(self._parts)))
                self._parts = []
                self._have = 0
                self._need = -1
        self._consumed += n
        return frames

    def _start_frame(self, size: int, position: int) -> None:
        if size < 0:
            raise DecodeError(f"negative frame size {size}", position)
        if size > self.max_frame_bytes:
            raise FrameTooLargeError(size, self.max_frame_bytes, position)
        self._need = size


def frame(parts: list[Buffer]) -> list[Buffer]:
    """Prefix already-encoded parts with their total size."""
    total = sum(b.nbytes if isinstance(b, memoryview) else len(b) for b in parts)
    return [pack_i32(total), *parts]
