"""The damage record: what a log knows it lost of data it had synced (corruption is not a crash).

Recovery cuts a log at its first bad entry either way; what differs is whether the lost entries
can have been acknowledged. A torn write at the unsynced tail cannot (nothing after it, no
clean shutdown): a plain cut. Damage in durable data (found after a clean shutdown, or with
intact entries after it) can: the record keeps the highest index the log had durably held,
written durably *before* the cut so a crash cannot erase the evidence, until the Raft layer
(which also adds what it alone can prove: a commit point beyond the log, a lost hard state)
has fetched the range back from a peer and clears it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from vdl_broker.log.fileio import atomic_write, fsync_dir

DAMAGE_FILE = "damaged"
_RECORD = struct.Struct("<qq")  # through index, term bound (-1: hard state intact)
_CRC = struct.Struct("<I")
UNKNOWN = -1  # the record itself is damaged: how far the loss reaches is unknown


@dataclass(frozen=True)
class DamageRecord:
    through_index: int  # highest index durably held before the damage (UNKNOWN if unreadable)
    term_bound: int = -1  # the Raft hard state was lost; highest term provable then (-1: intact)

    def merge(self, other: DamageRecord | None) -> DamageRecord:
        if other is None:
            return self
        through = UNKNOWN if UNKNOWN in (self.through_index, other.through_index) else max(
            self.through_index, other.through_index)
        return DamageRecord(through, max(self.term_bound, other.term_bound))


def save_damage(directory: Path, record: DamageRecord, durable: bool = True) -> None:
    body = _RECORD.pack(record.through_index, record.term_bound)
    atomic_write(Path(directory) / DAMAGE_FILE, body + _CRC.pack(crc32c.crc32c(body)), durable)


def load_damage(directory: Path) -> DamageRecord | None:
    try:
        data = (Path(directory) / DAMAGE_FILE).read_bytes()
    except FileNotFoundError:
        return None
    if len(data) != _RECORD.size + _CRC.size or _CRC.unpack_from(data, _RECORD.size)[0] != crc32c.crc32c(
            data[:_RECORD.size]):
        return DamageRecord(UNKNOWN, 0)  # unreadable evidence of damage is still damage
    through, bound = _RECORD.unpack_from(data)
    return DamageRecord(through, bound)


def clear_damage(directory: Path, durable: bool = True) -> None:
    (Path(directory) / DAMAGE_FILE).unlink(missing_ok=True)
    if durable:
        fsync_dir(Path(directory))
