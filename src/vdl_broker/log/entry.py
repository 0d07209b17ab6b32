"""The on-disk encoding of Raft entries in segments (the Entry and EntryType are the Raft core's:
vdl_broker.raft.types; the log stores them as they are).

On-disk entry (little-endian): crc32c u32 | type u8 | term i64 | index i64 | payload length u32 |
payload. The CRC covers everything after itself (header rest + payload), so a torn or flipped
entry is found by recovery. It is the Raft core's entry_checksum (vdl_broker.raft.types), which a
follower gets with each entry from its leader and stores as it came.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import crc32c

from vdl_broker.raft.types import Entry, EntryType, entry_checksum

# bytearray(n) zero-fills its n bytes; resizing an empty one does not (bytearray_resize in
# Objects/bytearrayobject.c reallocates only). A socket read overwrites the bytes anyway, and on
# a broker's 1 MiB produce and replication frames the zero-fill was 5-6% of its CPU.
_resize = ctypes.pythonapi.PyByteArray_Resize
_resize.argtypes = (ctypes.py_object, ctypes.c_ssize_t)
_resize.restype = ctypes.c_int


class FrozenBuffer(bytearray):
    """A buffer filled once by its owner (a socket read straight into it) and never changed
    after -- but for the base offset and leader epoch a leader stamps into a produced batch
    before the log sees it: the log keeps views into it as it keeps views into bytes, without a
    copy."""

    @classmethod
    def unfilled(cls, size: int) -> FrozenBuffer:
        """`size` bytes of whatever the allocator held before: for a reader that fills them all
        before anyone looks (a frame's body, read by the kernel)."""
        buffer = cls()
        if size:
            _resize(buffer, size)  # raises MemoryError itself (ctypes.pythonapi checks)
        return buffer


class OffsetOutOfRange(LookupError):
    """A Kafka offset outside [log_start_offset, log_end_offset]."""


class IndexOutOfRange(LookupError):
    """A Raft index that is compacted away (below first_index - 1) or beyond last_index."""


class DamagedEntry(Exception):
    """An entry read from a segment fails its CRC, or lies past the end of a file cut short: the
    file changed after the log checked it (a flipped byte, a truncation, on a running node).
    Nothing of it may leave the log; the log must be checked again from `segment_base`
    (StreamLog.check_again_from) and the loss fetched back."""

    def __init__(self, path: Path, position: int, segment_base: int, problem: str = "fails its CRC") -> None:
        super().__init__(f"{path}: the entry at byte {position} {problem}")
        self.segment_base = segment_base  # Raft index of the first entry of its segment


HEADER = struct.Struct("<IBqqI")
HEADER_SIZE = HEADER.size  # 25
ENTRY_TYPES = frozenset(int(t) for t in EntryType)


def entry_header(entry: Entry) -> bytes:
    return HEADER.pack(entry_checksum(entry), entry.type, entry.term, entry.index, len(entry.data))


def entry_crc(buf: memoryview, position: int, payload_length: int) -> int:
    """CRC32C over the header rest and payload of the entry at `position` in `buf`."""
    with buf[position + 4:position + HEADER_SIZE + payload_length] as span:
        return crc32c.crc32c(span)
