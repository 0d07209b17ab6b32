"""A log stores each entry under its Raft checksum (vdl_broker.raft.types.entry_checksum), computed
once: a leader's append keeps it on the entry for the frames to its followers, a follower's entry
brings it from the leader's frame and is stored under it as it came, and entries read back, from
the tail cache or from the segment, carry the checksum their header holds."""

from __future__ import annotations

from pathlib import Path

import crc32c
import pytest
from log_testing import make_batch

from vdl_broker.log import DamagedEntry, LogConfig, StreamLog
from vdl_broker.log.entry import HEADER, HEADER_SIZE
from vdl_broker.raft.types import Entry, EntryType, entry_checksum
from vdl_wire.records.batch_header import ATTRIBUTES_OFFSET


def _headers(directory: Path) -> list[tuple[int, int, int, int, int]]:
    """(crc, type, term, index, length) of every entry in the stream's segments, as on disk."""
    out = []
    for path in sorted(directory.glob("*.log")):
        data, position = path.read_bytes(), 0
        while position < len(data):
            out.append(header := HEADER.unpack_from(data, position))
            position += HEADER_SIZE + header[4]
    return out


def _checksum(entry_type: int, term: int, index: int, payload: bytes) -> int:
    return crc32c.crc32c(HEADER.pack(0, entry_type, term, index, len(payload))[4:] + payload)


def test_a_leaders_append_keeps_the_checksum_it_stores_and_reads_return_it(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", LogConfig(fsync=False))
    entries = [Entry(1, 1, EntryType.NOOP, b""), Entry(2, 1, EntryType.DATA, make_batch(0, 3, 0, 40)),
               Entry(3, 2, EntryType.METADATA, b'{"op": "x"}')]
    log.append(entries)
    stored = _headers(tmp_path / "s")
    assert stored == [(_checksum(e.type, e.term, e.index, bytes(e.data)), e.type, e.term, e.index, len(e.data))
                      for e in entries]
    assert [e.crc for e in entries] == [h[0] for h in stored]
    assert [e.crc for e in log.entries(1, 4)] == [h[0] for h in stored]  # from the tail cache
    log.close()
    reopened = StreamLog.open(tmp_path / "s", LogConfig(fsync=False, tail_cache_bytes=0))
    assert [(e.index, e.crc) for e in reopened.entries(1, 4)] == [(e.index, h[0]) for e, h in zip(entries, stored, strict=True)]
    reopened.close()


def test_a_followers_entry_is_stored_under_the_checksum_it_came_with(tmp_path: Path) -> None:
    """No pass of its own over the payload: a checksum that does not match the payload (damage in
    the leader's memory after its append, say) is stored as it came, and the entry is then found
    damaged when read, never served under a checksum of the follower's making."""
    log = StreamLog.open(tmp_path / "s", LogConfig(fsync=False, tail_cache_bytes=0))
    payload = make_batch(0, 1, 0, 10)
    good = Entry(1, 1, EntryType.DATA, payload, crc=_checksum(EntryType.DATA, 1, 1, payload))
    other = make_batch(1, 1, 0, 10)
    wrong = Entry(2, 1, EntryType.DATA, other, crc=entry_checksum(Entry(2, 1, EntryType.DATA, payload)))
    log.append([good, wrong])
    assert [h[0] for h in _headers(tmp_path / "s")] == [good.crc, wrong.crc]
    assert [bytes(e.data) for e in log.entries(1, 2)] == [payload]
    with pytest.raises(DamagedEntry, match="fails its CRC"):
        log.entries(2, 3)
    log.close()


def test_a_leaders_entry_extends_the_batch_crc_its_produce_path_checked(tmp_path: Path) -> None:
    """A payload whose CRC from some position on is known (a record batch whose own CRC the produce
    path checked) is not read again past it: the checksum stored extends what was checked, so bytes
    that changed after the check are found damaged when read, not stored as if intact."""
    payload, following = make_batch(0, 700, 0, 100 << 10), make_batch(700, 700, 0, 100 << 10)
    checked = (ATTRIBUTES_OFFSET, crc32c.crc32c(payload[ATTRIBUTES_OFFSET:]))  # what the batch's own CRC covers
    intact = Entry(1, 3, EntryType.DATA, payload, known_crc=checked)
    assert entry_checksum(intact) == _checksum(EntryType.DATA, 3, 1, payload)
    changed = bytearray(following)
    changed[-1] ^= 0x10
    after_the_check = Entry(2, 3, EntryType.DATA, bytes(changed), known_crc=(ATTRIBUTES_OFFSET, crc32c.crc32c(following[ATTRIBUTES_OFFSET:])))
    assert entry_checksum(after_the_check) == _checksum(EntryType.DATA, 3, 2, following)
    log = StreamLog.open(tmp_path / "s", LogConfig(fsync=False, tail_cache_bytes=0))
    log.append([intact, after_the_check])
    assert log.entries(1, 2) == [intact]
    with pytest.raises(DamagedEntry):
        log.entries(2, 3)
    log.close()
