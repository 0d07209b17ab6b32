"""Binary encoding of Raft messages between nodes (the transport's frame bodies).

A frame body carries the messages of many Raft groups from one sender to one receiver, so every
group between two nodes shares one connection and one tick's heartbeats travel together:

    frame   := version u8 | kind u8 | sender u32 | group count u32 | group*      (kind MESSAGES)
             | version u8 | kind u8 | sender u32                                   (kind HELLO)
             | version u8 | kind u8 | sender u32 | call id u32 | payload         (kind REQUEST/RESPONSE)
             | version u8 | kind u8 | sender u32 | incarnation u64               (kind HEARTBEAT)
    group   := name length u16 | name utf-8 | message count u32 | message*
    message := type u8 | flags u8 | to u32 | term i64 | log_term i64 | index i64 | commit i64
               | reject_hint i64 | entry count u32 | entry* | [snapshot [conf]]
               (flags: reject 1, force 2, snapshot 4, conf 8, quiesce 16)
    entry   := index i64 | term i64 | type u8 | payload length u32 | payload
    snapshot:= index i64 | term i64 | data length u32 | data (JSON; empty = None)
    conf    := voter count u16 | voter u32* | learner count u16 | learner u32*   (flag CONF)

REQUEST/RESPONSE frames carry the node-to-node calls of the layers above (opaque payloads:
the server forwards Kafka requests to the metadata leader with them), over the same connection
and so the same mutual TLS as Raft. A HEARTBEAT frame is the node-pair liveness signal
(vdl_broker.raft.liveness): sent when nothing else went to that peer for a tick; its incarnation
is new at every process start.

The leaving notice says the sender is stopping gracefully (a leader handing a group over stops
counting on it as a transferee: RaftGroup.stop). It is a MESSAGES frame with one group, named
LEAVING_GROUP (not a legal stream name), carrying no message: a release before it reads a frame
with nothing in it, where a frame kind of its own would make it drop the connection.

A checksummed frame (version CHECKSUMMED) is any of these with version 2 and, after it, the
CRC32C (u32) of everything before: TCP's 16-bit checksum lets some damaged segments through,
and a flipped term, index or commit, or a digit of a metadata command, would be taken as sent
(a DATA entry's record batch has a CRC of its own; nothing else does). A node sends them once
its cluster is at the feature level that has them (vdl_broker.cluster.features), when every node
reads them; it reads every version always.

A frame with entry checksums (version ENTRY_CHECKSUMS, MESSAGES frames only) carries each entry
with the checksum its sender's log stores it under (vdl_broker.raft.types.entry_checksum):

    entry   := index i64 | term i64 | type u8 | payload length u32 | checksum u32 | payload

and ends with the CRC32C of everything before but the entry payloads, which their own checksums
cover. The receiver checks each entry against its checksum and its log stores the entry under it
as it came: one pass over a payload on a follower (not one for the frame, one for the record
batch and one for its own header) and none on the leader beyond the one its own log makes.

All integers big-endian. Decoding never copies entry payloads: they are memoryview slices of the
frame, and each entry names the frame and its payload's start (Entry.frame, Entry.start).
Any malformed input raises WireError, and nothing else.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import crc32c

from vdl_broker.raft.types import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    SnapshotMeta,
    entry_checksum,
)

VERSION = 1
CHECKSUMMED = 2  # the version of a frame that ends with the CRC32C of everything before it
ENTRY_CHECKSUMS = 3  # a MESSAGES frame whose entries carry their checksums (see above)
KIND_HELLO = 1
KIND_MESSAGES = 2
KIND_REQUEST = 3
KIND_RESPONSE = 4
KIND_HEARTBEAT = 5
LEAVING_GROUP = "@leaving"

# The name of the metadata group (streams are named like Kafka topics, which cannot start "__"
# followed by this exact name in practice; the cluster layer refuses it as a stream name).
METADATA_GROUP = "__metadata"

_FRAME = struct.Struct(">BBI")
_COUNT = struct.Struct(">I")
_INCARNATION = struct.Struct(">Q")
_NAME_LEN = struct.Struct(">H")
_MESSAGE = struct.Struct(">BBIqqqqqI")
_ENTRY = struct.Struct(">qqBI")
_CHECKED_ENTRY = struct.Struct(">qqBII")  # ENTRY_CHECKSUMS: _ENTRY and the entry's checksum
_SNAPSHOT = struct.Struct(">qqI")
_NODE_COUNT = struct.Struct(">H")
_NODE = struct.Struct(">I")
_CRC = struct.Struct(">I")

_FLAG_REJECT = 1
_FLAG_FORCE = 2
_FLAG_SNAPSHOT = 4
_FLAG_CONF = 8  # the snapshot carries the configuration in force at its index
_FLAG_QUIESCE = 16  # HEARTBEAT(_RESPONSE): quiesce (vdl_broker.raft.quiescence)
_KNOWN_FLAGS = _FLAG_REJECT | _FLAG_FORCE | _FLAG_SNAPSHOT | _FLAG_CONF | _FLAG_QUIESCE
_MESSAGE_TYPES = {int(t): t for t in MessageType}
_ENTRY_TYPES = {int(t): t for t in EntryType}

Buffer = bytes | bytearray | memoryview


class WireError(ValueError):
    """Malformed bytes on a Raft connection (the one exception decoding raises)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at byte {position}")
        self.position = position


@dataclass(slots=True)
class Frame:
    kind: int
    sender: int
    messages: list[tuple[str, Message]]
    call_id: int = 0  # REQUEST/RESPONSE
    payload: memoryview | None = None
    incarnation: int = 0  # HEARTBEAT
    leaving: bool = False  # MESSAGES: it holds the leaving notice
    # MESSAGES: each entry matched the checksum its sender's log stored it under (ENTRY_CHECKSUMS)
    entries_checked: bool = False


# ---------------------------------------------------------------------------------- encoding


def encode_hello(sender: int) -> bytes:
    return _FRAME.pack(VERSION, KIND_HELLO, sender)


def encode_leaving(sender: int) -> bytes:
    """The leaving notice (see the module's docstring)."""
    name = LEAVING_GROUP.encode()
    return (_FRAME.pack(VERSION, KIND_MESSAGES, sender) + _COUNT.pack(1) + _NAME_LEN.pack(len(name)) + name
            + _COUNT.pack(0))


def encode_heartbeat(sender: int, incarnation: int) -> bytes:
    return _FRAME.pack(VERSION, KIND_HEARTBEAT, sender) + _INCARNATION.pack(incarnation)


def encode_call(sender: int, kind: int, call_id: int, payload: Buffer) -> list[Buffer]:
    """A REQUEST or RESPONSE frame body."""
    return [_FRAME.pack(VERSION, kind, sender) + _COUNT.pack(call_id), payload]


def encode_frame(sender: int, messages: Iterable[tuple[str, Message]], entry_checksums: bool = False) -> list[Buffer]:
    """The frame body as buffers (entry payloads are not copied); groups keep their first-seen
    order. With `entry_checksums`, a frame of version ENTRY_CHECKSUMS, its CRC32C included."""
    by_group: dict[str, list[Message]] = {}
    for group, message in messages:
        by_group.setdefault(group, []).append(message)
    version = ENTRY_CHECKSUMS if entry_checksums else VERSION
    parts: list[Buffer] = [_FRAME.pack(version, KIND_MESSAGES, sender), _COUNT.pack(len(by_group))]
    payloads: list[int] | None = [] if entry_checksums else None  # where the entry payloads are in parts
    for group, group_messages in by_group.items():
        name = group.encode()
        parts.append(_NAME_LEN.pack(len(name)) + name + _COUNT.pack(len(group_messages)))
        for message in group_messages:
            _encode_message(message, parts, payloads)
    if payloads is not None:
        parts.append(_CRC.pack(_crc_between(parts, payloads)))
    return parts


def _crc_between(parts: list[Buffer], payloads: list[int]) -> int:
    """CRC32C of `parts` but those at the positions `payloads` (ascending)."""
    crc, start = 0, 0
    for skipped in [*payloads, len(parts)]:
        for part in parts[start:skipped]:
            crc = crc32c.crc32c(part, crc)
        start = skipped + 1
    return crc


def _encode_message(m: Message, parts: list[Buffer], payloads: list[int] | None) -> None:
    flags = (_FLAG_REJECT if m.reject else 0) | (_FLAG_FORCE if m.force else 0) | (_FLAG_QUIESCE if m.quiesce else 0)
    if m.snapshot is not None:
        flags |= _FLAG_SNAPSHOT
        if m.snapshot.conf is not None:
            flags |= _FLAG_CONF
    entries: Sequence[Entry] = m.entries
    parts.append(_MESSAGE.pack(int(m.type), flags, m.to, m.term, m.log_term, m.index, m.commit,
                               m.reject_hint, len(entries)))
    for entry in entries:
        if payloads is None:
            parts.append(_ENTRY.pack(entry.index, entry.term, int(entry.type), len(entry.data)))
        else:
            parts.append(_CHECKED_ENTRY.pack(entry.index, entry.term, int(entry.type), len(entry.data),
                                             entry_checksum(entry)))
        if len(entry.data):
            if payloads is not None:
                payloads.append(len(parts))
            parts.append(entry.data)
    if m.snapshot is not None:
        snap = m.snapshot
        data = b"" if snap.data is None else json.dumps(snap.data, separators=(",", ":")).encode()
        parts.append(_SNAPSHOT.pack(snap.index, snap.term, len(data)) + data)
        if snap.conf is not None:
            parts.append(_encode_nodes(snap.conf.voters) + _encode_nodes(snap.conf.learners))


def _encode_nodes(nodes: Sequence[int]) -> bytes:
    return _NODE_COUNT.pack(len(nodes)) + b"".join(_NODE.pack(node) for node in nodes)


def frame_size(parts: Sequence[Buffer]) -> int:
    return sum(len(p) for p in parts)


def checksummed(parts: Sequence[Buffer]) -> list[Buffer]:
    """The frame body `parts` (any encoder's) as a checksummed frame: its version byte made
    CHECKSUMMED, its CRC32C after it. The payloads are not copied."""
    first = parts[0]
    head = bytes((CHECKSUMMED,)) + bytes(first[1:])  # a header, or a frame of a few bytes
    crc = crc32c.crc32c(head)
    for part in parts[1:]:
        crc = crc32c.crc32c(part, crc)
    return [head, *parts[1:], _CRC.pack(crc)]


# ---------------------------------------------------------------------------------- decoding


class _Reader:
    __slots__ = ("view", "pos", "checked", "crc", "covered")

    def __init__(self, data: Buffer) -> None:
        self.view = data if isinstance(data, memoryview) else memoryview(data)
        if self.view.ndim != 1 or self.view.itemsize != 1:
            self.view = self.view.cast("B")
        self.pos = 0
        self.checked = False  # ENTRY_CHECKSUMS: the CRC so far (crc) covers view[:covered]
        self.crc = 0
        self.covered = 0

    def take_payload(self, size: int) -> memoryview:
        """An entry's payload (take), left out of the frame's CRC when its entries carry checksums."""
        if self.checked:
            self.crc = crc32c.crc32c(self.view[self.covered:self.pos], self.crc)
            self.covered = self.pos + size
        return self.take(size)

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        end = self.pos + fmt.size
        if end > len(self.view):
            raise WireError(f"truncated: need {fmt.size} bytes, {len(self.view) - self.pos} left", self.pos)
        values = fmt.unpack_from(self.view, self.pos)
        self.pos = end
        return values

    def take(self, size: int) -> memoryview:
        end = self.pos + size
        if end > len(self.view):
            raise WireError(f"truncated: need {size} bytes, {len(self.view) - self.pos} left", self.pos)
        chunk = self.view[self.pos:end]
        self.pos = end
        return chunk


def decode_frame(data: Buffer) -> Frame:
    """Decode one frame body; entry payloads are memoryview slices of `data`."""
    try:
        reader = _Reader(data)
        expected_crc = None
        if len(reader.view) and reader.view[0] == CHECKSUMMED:
            reader.view = _verified(reader.view)
        elif len(reader.view) and reader.view[0] == ENTRY_CHECKSUMS:
            reader.view, expected_crc = _without_crc(reader.view)
            reader.checked = True
        version, kind, sender = reader.unpack(_FRAME)
        if version not in (VERSION, CHECKSUMMED, ENTRY_CHECKSUMS):
            raise WireError(f"unsupported wire version {version}", 0)
        if version == ENTRY_CHECKSUMS and kind != KIND_MESSAGES:
            raise WireError(f"a frame of kind {kind} with entry checksums", 1)
        if kind == KIND_HELLO:
            _expect_end(reader)
            return Frame(KIND_HELLO, sender, [])
        if kind in (KIND_REQUEST, KIND_RESPONSE):
            (call_id,) = reader.unpack(_COUNT)
            return Frame(kind, sender, [], call_id, reader.take(len(reader.view) - reader.pos))
        if kind == KIND_HEARTBEAT:
            (incarnation,) = reader.unpack(_INCARNATION)
            _expect_end(reader)
            return Frame(KIND_HEARTBEAT, sender, [], incarnation=incarnation)
        if kind != KIND_MESSAGES:
            raise WireError(f"unknown frame kind {kind}", 1)
        (group_count,) = reader.unpack(_COUNT)
        messages: list[tuple[str, Message]] = []
        leaving = False
        for _ in range(group_count):
            (name_len,) = reader.unpack(_NAME_LEN)
            position = reader.pos
            try:
                group = str(reader.take(name_len), "utf-8")
            except UnicodeDecodeError as error:
                raise WireError("group name is not UTF-8", position) from error
            (count,) = reader.unpack(_COUNT)
            if group == LEAVING_GROUP:
                if count:
                    raise WireError("the leaving notice carries messages", position)
                leaving = True
            for _ in range(count):
                messages.append((group, _decode_message(reader, sender)))
        _expect_end(reader)
        if expected_crc is not None and crc32c.crc32c(reader.view[reader.covered:], reader.crc) != expected_crc:
            raise WireError("the frame fails its CRC32C", len(reader.view))
        return Frame(KIND_MESSAGES, sender, messages, leaving=leaving, entries_checked=reader.checked)
    except WireError:
        raise
    except (ValueError, TypeError, struct.error, RecursionError, OverflowError) as error:
        raise WireError(f"malformed frame: {error}", 0) from error


def _without_crc(frame: memoryview) -> tuple[memoryview, int]:
    """A checksummed frame's body and the CRC after it."""
    end = len(frame) - _CRC.size
    if end < _FRAME.size:
        raise WireError(f"a checksummed frame of {len(frame)} bytes", 0)
    return frame[:end], _CRC.unpack_from(frame, end)[0]


def _verified(frame: memoryview) -> memoryview:
    """A checksummed frame's body without its CRC, which it matches (else WireError)."""
    body, crc = _without_crc(frame)
    if crc32c.crc32c(body) != crc:
        raise WireError("the frame fails its CRC32C", len(body))
    return body


def _expect_end(reader: _Reader) -> None:
    if reader.pos != len(reader.view):
        raise WireError(f"{len(reader.view) - reader.pos} trailing bytes", reader.pos)


def _decode_nodes(reader: _Reader) -> tuple[int, ...]:
    (count,) = reader.unpack(_NODE_COUNT)
    if count * _NODE.size > len(reader.view) - reader.pos:
        raise WireError(f"node count {count} exceeds the frame", reader.pos - _NODE_COUNT.size)
    return tuple(reader.unpack(_NODE)[0] for _ in range(count))


def _decode_message(reader: _Reader, sender: int) -> Message:
    position = reader.pos
    kind, flags, to, term, log_term, index, commit, hint, entry_count = reader.unpack(_MESSAGE)
    message_type = _MESSAGE_TYPES.get(kind)
    if message_type is None:
        raise WireError(f"unknown message type {kind}", position)
    if flags & ~_KNOWN_FLAGS:
        raise WireError(f"unknown message flags {flags:#x}", position + 1)
    # Each entry needs at least its header: refuse counts the frame cannot hold before allocating.
    header = _CHECKED_ENTRY if reader.checked else _ENTRY
    if entry_count * header.size > len(reader.view) - reader.pos:
        raise WireError(f"entry count {entry_count} exceeds the frame", position + _MESSAGE.size - 4)
    entries: list[Entry] = []
    for _ in range(entry_count):
        entry_position = reader.pos
        e_index, e_term, e_type, size, *checksum = reader.unpack(header)
        entry_type = _ENTRY_TYPES.get(e_type)
        if entry_type is None:
            raise WireError(f"unknown entry type {e_type}", entry_position + 16)
        start = reader.pos
        entry = Entry(e_index, e_term, entry_type, reader.take_payload(size), reader.view, start)
        if checksum and entry_checksum(entry) != checksum[0]:
            raise WireError(f"entry {e_index} fails its checksum", entry_position)
        entries.append(entry)
    snapshot = None
    if flags & _FLAG_SNAPSHOT:
        snap_position = reader.pos
        s_index, s_term, size = reader.unpack(_SNAPSHOT)
        raw = reader.take(size)
        data = None
        if size:
            try:
                data = json.loads(str(raw, "utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise WireError("snapshot data is not JSON", snap_position + _SNAPSHOT.size) from error
        conf = None
        if flags & _FLAG_CONF:
            conf = ConfState(_decode_nodes(reader), _decode_nodes(reader))
        snapshot = SnapshotMeta(s_index, s_term, data, conf)
    elif flags & _FLAG_CONF:
        raise WireError("a configuration without a snapshot", position + 1)
    return Message(message_type, to, sender, term, log_term=log_term, index=index, entries=entries,
                   commit=commit, reject=bool(flags & _FLAG_REJECT), reject_hint=hint, snapshot=snapshot,
                   force=bool(flags & _FLAG_FORCE), quiesce=bool(flags & _FLAG_QUIESCE))
