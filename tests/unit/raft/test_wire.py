"""Raft wire format: round trips for every message type, zero-copy payloads, hostile bytes."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vdl_broker.raft.types import ConfState, Entry, EntryType, Message, MessageType, SnapshotMeta
from vdl_broker.raft.wire import (
    CHECKSUMMED,
    ENTRY_CHECKSUMS,
    KIND_HELLO,
    KIND_MESSAGES,
    KIND_REQUEST,
    LEAVING_GROUP,
    METADATA_GROUP,
    WireError,
    checksummed,
    decode_frame,
    encode_call,
    encode_frame,
    encode_heartbeat,
    encode_hello,
    encode_leaving,
)


def _join(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def _refuses_every_flipped_bit(frame: bytes) -> None:
    for position in range(len(frame)):
        for bit in range(8):
            mutated = bytearray(frame)
            mutated[position] ^= 1 << bit
            with pytest.raises(WireError):
                decode_frame(mutated)


def _sample_messages() -> list[tuple[str, Message]]:
    entries = [Entry(5, 2, EntryType.DATA, b"x" * 70), Entry(6, 2, EntryType.NOOP, b""),
               Entry(7, 3, EntryType.CONFIG, b"{}")]
    out: list[tuple[str, Message]] = []
    for i, kind in enumerate(MessageType):
        message = Message(kind, to=2, sender=1, term=3 + i, log_term=2, index=4, commit=9,
                          reject=i % 2 == 0, reject_hint=i, force=i % 3 == 0)
        if kind == MessageType.APPEND:
            message.entries = entries
        if kind == MessageType.SNAPSHOT:
            message.snapshot = SnapshotMeta(100, 7, 123456)
        out.append(("stream-a" if i % 2 else METADATA_GROUP, message))
    out.append(("ünïcode", Message(MessageType.SNAPSHOT, 2, 1, 1, snapshot=SnapshotMeta(1, 1, None))))
    out.append(("s", Message(MessageType.SNAPSHOT, 2, 1, 1, snapshot=SnapshotMeta(1, 1, {"start_offset": 5}))))
    out.append(("c", Message(MessageType.SNAPSHOT, 2, 1, 1,
                             snapshot=SnapshotMeta(9, 2, 77, ConfState((1, 2, 4), (5,))))))
    out.append(("c", Message(MessageType.SNAPSHOT, 2, 1, 1, snapshot=SnapshotMeta(9, 2, 77, ConfState()))))
    return out


def test_round_trip_every_message_type() -> None:
    messages = _sample_messages()
    frame = decode_frame(_join(encode_frame(1, messages)))
    assert frame.kind == KIND_MESSAGES and frame.sender == 1
    # Groups are regrouped by name (first-seen order); within a group the order is kept.
    expected = sorted(messages, key=lambda gm: [g for g, _ in messages].index(gm[0]))
    assert len(frame.messages) == len(expected)
    for (group, got), (want_group, want) in zip(frame.messages, expected, strict=True):
        assert group == want_group
        got_entries = [(e.index, e.term, e.type, bytes(e.data)) for e in got.entries]
        want_entries = [(e.index, e.term, e.type, bytes(e.data)) for e in want.entries]
        assert got_entries == want_entries
        got.entries, want.entries = (), ()
        assert got == want


def test_entry_payloads_are_zero_copy_slices() -> None:
    payload = bytes(range(200))
    message = Message(MessageType.APPEND, 2, 1, 1, entries=[Entry(1, 1, EntryType.DATA, payload)])
    body = bytearray(_join(encode_frame(1, [("g", message)])))
    frame = decode_frame(body)
    data = frame.messages[0][1].entries[0].data
    assert isinstance(data, memoryview) and bytes(data) == payload
    body[-1] ^= 0xFF  # the slice sees the frame's memory
    assert data[-1] == payload[-1] ^ 0xFF


def test_hello() -> None:
    frame = decode_frame(encode_hello(42))
    assert (frame.kind, frame.sender, frame.messages) == (KIND_HELLO, 42, [])


def test_the_leaving_notice_is_a_frame_of_messages_with_nothing_in_it() -> None:
    """A release that does not know the notice decodes a MESSAGES frame without messages (a new
    frame kind would be a bad frame there, and close the connection)."""
    body = encode_leaving(42)
    name = LEAVING_GROUP.encode()
    assert body == struct.pack(">BBIIH", 1, KIND_MESSAGES, 42, 1, len(name)) + name + struct.pack(">I", 0)
    frame = decode_frame(body)
    assert (frame.kind, frame.sender, frame.messages, frame.leaving) == (KIND_MESSAGES, 42, [], True)
    assert decode_frame(_join(encode_frame(42, _sample_messages()))).leaving is False
    with pytest.raises(WireError, match="trailing"):
        decode_frame(body + b"x")
    with pytest.raises(WireError, match="leaving notice carries messages"):
        decode_frame(body[:-4] + struct.pack(">I", 1) + body[-4:])


def test_truncations_and_bit_flips_raise_wire_error_only() -> None:
    body = _join(encode_frame(1, _sample_messages()))
    for cut in range(len(body)):
        with pytest.raises(WireError):
            decode_frame(body[:cut])
    for position in range(len(body)):
        for bit in (0x01, 0x80):
            mutated = bytearray(body)
            mutated[position] ^= bit
            try:
                decode_frame(mutated)
            except WireError:
                pass


def test_a_checksummed_frame_decodes_as_its_plain_twin_and_refuses_every_flipped_bit() -> None:
    """Version CHECKSUMMED: the same frame with the CRC32C of its bytes after it. A plain frame
    takes most flipped bits as sent (a term, an index, a commit, a digit of a metadata command);
    its checksummed twin refuses every one, in the header, the messages and the payloads alike."""
    messages = [("stream-a", Message(MessageType.APPEND, 2, 1, 3, log_term=2, index=4, commit=9,
                                     entries=[Entry(5, 3, EntryType.METADATA, b'{"op": "x", "offset": 17}')]))]
    encoders = [encode_frame(1, messages), [encode_hello(1)], [encode_heartbeat(1, 99)], [encode_leaving(1)],
                encode_call(1, KIND_REQUEST, 7, b"a call's payload")]
    for parts in encoders:
        plain, sealed = _join(parts), _join(checksummed(parts))
        assert sealed == bytes((CHECKSUMMED,)) + plain[1:] + struct.pack(">I", crc32c.crc32c(sealed[:-4]))
        twin, got = decode_frame(plain), decode_frame(sealed)
        assert (got.kind, got.sender, got.call_id, got.incarnation, got.leaving) == \
            (twin.kind, twin.sender, twin.call_id, twin.incarnation, twin.leaving)
        assert [(g, m.term, m.index, m.commit, [bytes(e.data) for e in m.entries]) for g, m in got.messages] == \
            [(g, m.term, m.index, m.commit, [bytes(e.data) for e in m.entries]) for g, m in twin.messages]
        assert (None if got.payload is None else bytes(got.payload)) == \
            (None if twin.payload is None else bytes(twin.payload))
        _refuses_every_flipped_bit(sealed)
    # What the plain frame does with a flipped digit of the command: takes it.
    plain = bytearray(_join(encode_frame(1, messages)))
    plain[plain.index(b"17") + 1] ^= 0x01
    assert bytes(decode_frame(plain).messages[0][1].entries[0].data).endswith(b'"offset": 16}')
    with pytest.raises(WireError, match="a checksummed frame of 7 bytes"):
        decode_frame(bytes((CHECKSUMMED,)) + b"\0" * 6)


def _on_disk_checksum(entry: Entry) -> int:
    """The checksum a log's entry header holds (vdl_broker/log/entry.py), spelled out here."""
    return crc32c.crc32c(struct.pack("<BqqI", entry.type, entry.term, entry.index, len(entry.data)) + bytes(entry.data))


def test_entries_travel_with_the_checksum_their_log_stores_them_under() -> None:
    """Version ENTRY_CHECKSUMS: each entry carries the checksum of its log header, which the
    receiver checks and keeps (Entry.crc), so its log stores it as it came, and the frame's CRC32C
    covers the rest. It decodes as its plain twin, payloads still views of the frame."""
    messages = _sample_messages()
    sent = [e for _, m in messages for e in m.entries]
    assert sent and all(e.crc is None for e in sent)
    parts = encode_frame(1, messages, entry_checksums=True)
    assert [e.crc for e in sent] == [_on_disk_checksum(e) for e in sent]  # computed once, kept by the sender
    body = bytearray(_join(parts))
    got, twin = decode_frame(body), decode_frame(_join(encode_frame(1, messages)))
    assert (body[0], got.entries_checked, twin.entries_checked) == (ENTRY_CHECKSUMS, True, False)
    assert got.messages == twin.messages and got.kind == KIND_MESSAGES and got.sender == 1
    received = [e for _, m in got.messages for e in m.entries]
    assert [e.crc for e in received] == [_on_disk_checksum(e) for e in sent]
    assert all(e.data.obj is body for e in received if len(e.data))
    # The frame's CRC32C covers everything but the payloads; the payloads, their checksums.
    payloads = [i for i, part in enumerate(parts) if any(part is e.data for e in sent)]
    assert len(payloads) == sum(1 for e in sent if len(e.data))
    assert body[-4:] == struct.pack(">I", crc32c.crc32c(b"".join(
        bytes(part) for i, part in enumerate(parts[:-1]) if i not in payloads)))


def test_a_frame_with_entry_checksums_refuses_every_flipped_bit() -> None:
    messages = [("stream-a", Message(MessageType.APPEND, 2, 1, 3, log_term=2, index=4, commit=9, entries=[
        Entry(5, 3, EntryType.METADATA, b'{"op": "x", "offset": 17}'), Entry(6, 3, EntryType.NOOP, b""),
        Entry(7, 3, EntryType.DATA, b"a batch")]))]
    sealed = _join(encode_frame(1, messages, entry_checksums=True))
    _refuses_every_flipped_bit(sealed)
    payload = sealed.index(b"a batch")
    with pytest.raises(WireError, match=f"entry 7 fails its checksum at byte {payload - 25}"):
        decode_frame(sealed[:payload] + b"A" + sealed[payload + 1:])


def test_an_entry_goes_out_with_the_checksum_it_has_and_the_receiver_checks_it() -> None:
    """The sender computes an entry's checksum once (its log's append, or the first frame) and
    never again: an entry whose payload changed after it is refused by the receiver."""
    entry = Entry(5, 3, EntryType.DATA, b"as stored", crc=_on_disk_checksum(Entry(5, 3, EntryType.DATA, b"as sent")))
    frame = _join(encode_frame(1, [("s", Message(MessageType.APPEND, 2, 1, 3, entries=[entry]))], True))
    with pytest.raises(WireError, match="entry 5 fails its checksum"):
        decode_frame(frame)


def test_only_messages_frames_carry_entry_checksums() -> None:
    hello = bytes((ENTRY_CHECKSUMS,)) + _join([encode_hello(1)])[1:]
    with pytest.raises(WireError, match="a frame of kind 1 with entry checksums"):
        decode_frame(hello + struct.pack(">I", crc32c.crc32c(hello)))
    with pytest.raises(WireError, match="a checksummed frame of 3 bytes"):
        decode_frame(bytes((ENTRY_CHECKSUMS, KIND_MESSAGES, 0)))


def test_huge_counts_are_refused_before_allocating() -> None:
    header = struct.pack(">BBI", 1, KIND_MESSAGES, 1) + struct.pack(">I", 1) + struct.pack(">H", 1) + b"g"
    message = struct.pack(">BBIqqqqqI", 1, 0, 2, 1, 0, 0, 0, 0, 0xFFFFFFFF)
    with pytest.raises(WireError, match="entry count"):
        decode_frame(header + struct.pack(">I", 1) + message)
    with pytest.raises(WireError):
        decode_frame(header + struct.pack(">I", 0xFFFFFFFF))


def test_bad_snapshot_json_and_unknown_types() -> None:
    good = _join(encode_frame(1, [("g", Message(MessageType.SNAPSHOT, 2, 1, 1, snapshot=SnapshotMeta(1, 1, 7)))]))
    assert decode_frame(good).messages[0][1].snapshot == SnapshotMeta(1, 1, 7)
    with pytest.raises(WireError, match="JSON"):
        decode_frame(good[:-1] + b"{")
    deep = b"[" * 100_000
    bad = good[: -len(b"7") - 4] + struct.pack(">I", len(deep)) + deep
    with pytest.raises(WireError):
        decode_frame(bad)
    with pytest.raises(WireError, match="version"):
        decode_frame(b"\x09" + good[1:])
    with pytest.raises(WireError, match="kind"):
        decode_frame(good[:1] + b"\x07" + good[2:])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_never_crash(data: bytes) -> None:
    for candidate in (data, struct.pack(">BB", 1, KIND_MESSAGES) + data):
        try:
            decode_frame(candidate)
        except WireError:
            pass


_entries = st.lists(st.builds(Entry, st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1),
                              st.sampled_from(list(EntryType)), st.binary(max_size=50)), max_size=4)
_messages = st.builds(
    Message, st.sampled_from(list(MessageType)), st.integers(0, 2**32 - 1), st.just(9),
    st.integers(0, 2**63 - 1), log_term=st.integers(0, 2**63 - 1), index=st.integers(0, 2**63 - 1),
    entries=_entries, commit=st.integers(0, 2**63 - 1), reject=st.booleans(),
    reject_hint=st.integers(0, 2**63 - 1), force=st.booleans(),
    snapshot=st.none() | st.builds(SnapshotMeta, st.integers(0, 2**40), st.integers(0, 2**40),
                                   st.none() | st.integers(0, 2**50)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", METADATA_GROUP]), _messages), max_size=6))
def test_property_round_trip(messages: list[tuple[str, Message]]) -> None:
    frame = decode_frame(_join(encode_frame(9, messages)))
    order = list(dict.fromkeys(g for g, _ in messages))
    expected = sorted(messages, key=lambda gm: order.index(gm[0]))
    assert [g for g, _ in frame.messages] == [g for g, _ in expected]
    for (_, got), (_, want) in zip(frame.messages, expected, strict=True):
        assert [(e.index, e.term, e.type, bytes(e.data)) for e in got.entries] == \
            [(e.index, e.term, e.type, bytes(e.data)) for e in want.entries]
        assert (got.type, got.to, got.term, got.log_term, got.index, got.commit, got.reject, got.reject_hint,
                got.force, got.snapshot) == (want.type, want.to, want.term, want.log_term, want.index,
                                             want.commit, want.reject, want.reject_hint, want.force, want.snapshot)


def test_configuration_of_a_log_reset_round_trips_and_bad_ones_are_wire_errors() -> None:
    message = Message(MessageType.SNAPSHOT, 2, 1, 1, snapshot=SnapshotMeta(9, 2, 77, ConfState((1, 2), (3,))))
    body = _join(encode_frame(1, [("g", message)]))
    assert decode_frame(body).messages[0][1].snapshot == SnapshotMeta(9, 2, 77, ConfState((1, 2), (3,)))
    with pytest.raises(WireError, match="exceeds the frame"):
        decode_frame(body[:-3])  # the learner list cut short
    # The configuration flag on a message that carries no snapshot.
    plain = bytearray(_join(encode_frame(1, [("g", Message(MessageType.HEARTBEAT, 2, 1, 1))])))
    flags_at = 1 + 1 + 4 + 4 + 2 + 1 + 4 + 1  # version, kind, sender, groups, name len, "g", count, type
    plain[flags_at] |= 8
    with pytest.raises(WireError, match="without a snapshot"):
        decode_frame(bytes(plain))
