"""Record compression codecs: none, gzip, snappy (xerial framing and raw), lz4 (frame), zstd.

Every decompression is bounded by `max_output_bytes` (decompression bombs) and every failure
surfaces as DecodeError, never as a codec library's own exception.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from vdl_wire.errors import DecodeError

# Default bound for one batch's decompressed records: Kafka's default max.message.bytes is 1 MiB
# compressed; real compression ratios rarely exceed 100x, so 256 MiB is generous but finite.
DEFAULT_MAX_OUTPUT_BYTES = 256 << 20


class Compression(IntEnum):
    """Codec id in the low 3 bits of the attributes. # Kafka protocol guide: Record Batch"""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# xerial snappy-java stream header: marker -126, "SNAPPY", NUL, then version and compat int32s.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def compress(codec: Compression | int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress `data` the way the Java client does for this codec, at KIP-390's `level` (None:
    the codec's default; snappy has none). gzip: 1..9 or -1 (zlib's default, 6); lz4: 1 is
    LZ4's fast mode, above it LZ4 HC at that level (Kafka's Lz4Compression); zstd: -131072..22."""
    codec = _codec(codec, 0)
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        compressor = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)  # wbits 31 = gzip container
        return compressor.compress(data) + compressor.flush()
    if codec == Compression.SNAPPY:
        return _xerial_compress(data)
    if codec == Compression.LZ4:
        # KIP-57: Kafka reads independent blocks only. python-lz4's levels below 3 are its fast mode.
        lz4_level = 0 if level is None or level <= 1 else min(max(level, lz4.frame.COMPRESSIONLEVEL_MINHC),
                                                                      lz4.frame.COMPRESSIONLEVEL_MAX)
        compressed: bytes = lz4.frame.compress(bytes(data), compression_level=lz4_level, block_linked=False,
                                               content_checksum=False)
        return compressed
    return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)


def decompress(codec: Compression | int, data: bytes | bytearray | memoryview,
               max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> bytes:
    """Decompress, raising DecodeError on any malformed input or output above the bound."""
    codec = _codec(codec, 0)
    if codec == Compression.NONE:
        if len(data) > max_output_bytes:
            raise DecodeError("uncompressed data larger than allowed", max_output_bytes)
        return bytes(data)
    try:
        if codec == Compression.GZIP:
            return _gzip_decompress(data, max_output_bytes)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data, max_output_bytes)
        if codec == Compression.LZ4:
            return _lz4_decompress(data, max_output_bytes)
        return _zstd_decompress(data, max_output_bytes)
    except DecodeError:
        raise
    except (zlib.error, zstandard.ZstdError, cramjam.DecompressionError, RuntimeError, ValueError,
            OverflowError, MemoryError, TypeError, struct.error) as error:
        raise DecodeError(f"{codec.name.lower()} decompression failed: {error}", 0) from error


def _codec(codec: int, position: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise DecodeError(f"unknown compression codec {codec}", position) from None


def _too_large(max_output_bytes: int) -> DecodeError:
    return DecodeError(f"decompressed size exceeds the limit of {max_output_bytes} bytes", 0)


def _gzip_decompress(data: bytes | bytearray | memoryview, max_output_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    remaining: bytes | bytearray | memoryview = data
    # Java's GZIPInputStream reads concatenated members, so we do too.
    while True:
        decompressor = zlib.decompressobj(31)
        chunk = decompressor.decompress(remaining, max_output_bytes - total + 1)
        total += len(chunk)
        chunks.append(chunk)
        if total > max_output_bytes or decompressor.unconsumed_tail:
            raise _too_large(max_output_bytes)
        if not decompressor.eof:
            raise DecodeError("truncated gzip stream", len(data))
        remaining = decompressor.unused_data
        if not remaining:
            return b"".join(chunks)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_output_bytes: int) -> bytes:
    view = memoryview(data)
    if len(view) < 16 or view[:8] != XERIAL_MAGIC:
        return _snappy_raw(view, max_output_bytes, 0)
    # xerial framing: 16-byte header, then blocks of (int32 big-endian length, raw snappy).
    # Version and compat ints are ignored, as Kafka does (some producers write them wrong).
    chunks: list[bytes] = []
    total = 0
    position = 16
    end = len(view)
    while position < end:
        if end - position < 4:
            raise DecodeError("truncated xerial snappy block length", position)
        (length,) = _INT32.unpack_from(view, position)
        position += 4
        if length < 0 or length > end - position:
            raise DecodeError(f"xerial snappy block length {length} exceeds the input", position - 4)
        block = _snappy_raw(view[position:position + length], max_output_bytes - total, position)
        total += len(block)
        chunks.append(block)
        position += length
    return b"".join(chunks)


def _snappy_raw(view: memoryview, max_output_bytes: int, position: int) -> bytes:
    # The raw format starts with the uncompressed length: check it before allocating.
    size = _snappy_declared_length(view, position)
    if size > max_output_bytes:
        raise _too_large(max_output_bytes)
    return bytes(cramjam.snappy.decompress_raw(view))


def _snappy_declared_length(view: memoryview, position: int) -> int:
    value = 0
    for shift_index in range(5):
        if shift_index >= len(view):
            break
        byte = view[shift_index]
        value |= (byte & 0x7F) << (7 * shift_index)
        if byte < 0x80:
            return value
    raise DecodeError("bad snappy length preamble", position)


def _lz4_decompress(data: bytes | bytearray | memoryview, max_output_bytes: int) -> bytes:
    frame = _lz4_fix_header_checksum(data)
    bound = _lz4_output_bound(frame)
    if bound is not None and bound <= max_output_bytes:
        # Fast path (about 3x faster): the block walk proves the output cannot exceed the limit.
        whole: bytes = lz4.frame.decompress(frame)
        return whole
    decompressor = lz4.frame.LZ4FrameDecompressor()
    output: bytes = decompressor.decompress(frame, max_output_bytes + 1)
    if len(output) > max_output_bytes:
        raise _too_large(max_output_bytes)
    if not decompressor.eof:
        if decompressor.needs_input:
            raise DecodeError("truncated lz4 frame", len(data))
        raise _too_large(max_output_bytes)
    return output


_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4_output_bound(frame: bytes | bytearray | memoryview) -> int | None:
    """Upper bound of a single LZ4 frame's output from its block headers, or None if unusual.

    # LZ4 frame format: magic, FLG, BD, [content size 8], [dict id 4], HC; blocks of
    # (uint32 LE size, high bit = stored uncompressed, data, [checksum 4]); end mark 0; [checksum 4].
    """
    if len(frame) < 7 or bytes(frame[:4]) != _LZ4_MAGIC:
        return None
    flags = frame[4]
    block_max = _LZ4_BLOCK_MAX.get((frame[5] >> 4) & 0x07)
    if block_max is None or flags >> 6 != 1:
        return None
    position = 7 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    block_checksum = 4 if flags & 0x10 else 0
    end = len(frame)
    blocks = 0
    while True:
        if end - position < 4:
            return None
        (size,) = struct.unpack_from("<I", frame, position)
        position += 4
        if size == 0:
            break
        size &= 0x7FFFFFFF
        if size > block_max:
            return None
        position += size + block_checksum
        blocks += 1
    position += 4 if flags & 0x04 else 0
    bound = blocks * block_max
    # lz4.frame.decompress allocates the declared content size up front: it must be in bound too.
    if flags & 0x08 and struct.unpack_from("<Q", frame, 6)[0] > bound:
        return None
    return bound if position == end else None


def _lz4_fix_header_checksum(data: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """Accept Kafka 0.8/0.9's wrong LZ4 header checksum (computed over the magic too, KAFKA-3160)."""
    if len(data) < 7 or bytes(data[:4]) != _LZ4_MAGIC:
        return data
    flags = data[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(data) <= end:
        return data
    correct = (_xxh32(bytes(data[4:end])) >> 8) & 0xFF
    if data[end] == correct:
        return data
    if data[end] == (_xxh32(bytes(data[0:end])) >> 8) & 0xFF:
        fixed = bytearray(data)
        fixed[end] = correct
        return fixed
    return data


def _zstd_decompress(data: bytes | bytearray | memoryview, max_output_bytes: int) -> bytes:
    # Fed in small input steps so a bomb is caught after a bounded overshoot (a zstd block of a
    # few bytes can expand to 128 KiB), and frame by frame to see truncation (eof stays False).
    view = memoryview(data)
    chunks: list[bytes] = []
    total = 0
    position = 0
    while position < len(view):
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        while not decompressor.eof:
            if position >= len(view):
                raise DecodeError("truncated zstd frame", position)
            piece = view[position:position + _ZSTD_STEP]
            position += len(piece)
            output = decompressor.decompress(piece)
            total += len(output)
            if total > max_output_bytes:
                raise _too_large(max_output_bytes)
            chunks.append(output)
        position -= len(decompressor.unused_data)
    return b"".join(chunks)


_ZSTD_STEP = 1024


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def _xxh32(data: bytes) -> int:
    """xxHash32 (seed 0) of a short input (< 16 bytes): only LZ4 frame descriptors need it."""
    h = (_P5 + len(data)) & _M32
    position = 0
    while position + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, position)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        position += 4
    for byte in data[position:]:
        h = (_rotl((h + byte * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)
