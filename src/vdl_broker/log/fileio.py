"""Small durable-file helpers shared by the log modules."""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64)
_munmap = _libc.munmap
_munmap.restype = ctypes.c_int
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    """os.pwrite of every byte: a short write (the file system filling up) is finished, or fails
    with the error the next write meets (ENOSPC) -- never taken for done, which left a file
    extended past its written bytes with a hole there (on tmpfs, a mapping that touches a hole
    on a full file system is killed by SIGBUS)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


IOV_MAX = 1024


def writev_all(fd: int, parts: list[bytes | bytearray | memoryview], total: int = -1) -> None:
    """Write every buffer in order with as few writev calls as possible (no user-space join).
    `total` (their summed length, when the caller knows it) saves a pass over the buffers."""
    if 0 <= total and len(parts) <= IOV_MAX:
        written = os.writev(fd, parts)
        if written < total:
            write_all(fd, memoryview(b"".join(parts))[written:])
        return
    for start in range(0, len(parts), IOV_MAX):
        group = parts[start:start + IOV_MAX]
        total = sum(len(p) for p in group)
        written = os.writev(fd, group)
        if written < total:  # short write (rare on regular files): finish the rest plainly
            write_all(fd, memoryview(b"".join(group))[written:])


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Temp file, fsync, rename, fsync the directory: the file is either old or new, never torn."""
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        # Disk full: give the space back at once (the old file is untouched).
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(temp, path)
    if durable:
        fsync_dir(path.parent)


def map_file(path: Path) -> memoryview | None:
    """The whole file, mapped read-only (None if it is empty): its pages are read on demand and
    belong to the page cache, not to the process's memory. No descriptor stays open, as with
    mmap.mmap, which keeps a duplicate of it while the mapping lives: one per mapped file. Unmapped
    once no buffer uses it. The file must not shrink while mapped (a read past its end faults):
    change it by writing another file and renaming it over this one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        address = _mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            error = ctypes.get_errno()
            raise OSError(error, f"mmap: {os.strerror(error)}", str(path))
    finally:
        os.close(fd)
    pages = (ctypes.c_char * size).from_address(address)
    weakref.finalize(pages, _munmap, address, size)  # once the last view of it is gone
    return memoryview(pages).cast("B").toreadonly()
