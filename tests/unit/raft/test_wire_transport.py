"""RaftTransport over loopback: one connection per pair, groups multiplexed, heartbeats coalesced,
reconnect after a restart, drop (not block) when a peer is down."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest

from tests.support.waiting import within
from vdl_broker.raft.transport import RaftTransport, TransportConfig
from vdl_broker.raft.types import Entry, EntryType, Message, MessageType, entry_checksum
from vdl_broker.raft.wire import ENTRY_CHECKSUMS
from vdl_wire.records import RecordBatchBuilder

TIER = "component"  # real sockets, threads or sleeps in this process
pytestmark = pytest.mark.timeout(30)

FAST = TransportConfig(backoff_min_s=0.01, backoff_max_s=0.1)


class Inbox:
    def __init__(self) -> None:
        self.items: list[tuple[str, Message]] = []
        self.changed = asyncio.Event()

    def __call__(self, group: str, message: Message) -> None:
        self.items.append((group, message))
        self.changed.set()

    async def wait_count(self, count: int, timeout: float = 5.0) -> None:
        async def waiter() -> None:
            while len(self.items) < count:
                self.changed.clear()
                await self.changed.wait()
        await within(waiter(), timeout)


async def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async def waiter() -> None:
        while not predicate():
            await asyncio.sleep(0.005)
    await within(waiter(), timeout)


async def _mesh(n: int) -> tuple[list[RaftTransport], list[Inbox]]:
    inboxes = [Inbox() for _ in range(n)]
    transports = [RaftTransport(i + 1, ("127.0.0.1", 0), inboxes[i], config=FAST) for i in range(n)]
    for t in transports:
        await t.start()
    for t in transports:
        for other in transports:
            if other is not t:
                t.add_peer(other.node_id, ("127.0.0.1", other.port))
    await _until(lambda: all(t.is_connected(o.node_id) for t in transports for o in transports if o is not t))
    return transports, inboxes


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro())


def _batch(value: bytes) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(1_000, None, value)
    return builder.build()


def test_groups_multiplexed_on_one_connection_both_ways() -> None:
    async def main() -> None:
        (a, b, c), (ia, ib, ic) = await _mesh(3)
        try:
            payload = _batch(b"p" * 1000)  # a DATA entry holds one record batch (its CRC is checked)
            for g in range(20):
                assert a.send(f"s{g}", Message(MessageType.APPEND, 2, 1, 1, index=g,
                                               entries=[Entry(g + 1, 1, EntryType.DATA, payload)]))
                assert b.send(f"s{g}", Message(MessageType.APPEND_RESPONSE, 1, 2, 1, index=g))
                assert c.send(f"s{g}", Message(MessageType.HEARTBEAT, 2, 3, 1, commit=g))
            await ib.wait_count(40)
            await ia.wait_count(20)
            assert ic.items == []
            from_a = [(g, m.index) for g, m in ib.items if m.sender == 1]
            assert from_a == [(f"s{g}", g) for g in range(20)]
            assert all(bytes(m.entries[0].data) == payload for _, m in ib.items if m.sender == 1)
            assert sorted(m.commit for _, m in ib.items if m.sender == 3) == list(range(20))
            # One TCP connection per pair, whichever side sends.
            for t in (a, b, c):
                for peer in (1, 2, 3):
                    if peer != t.node_id:
                        assert t.stats(peer).connects == 1
        finally:
            for t in (a, b, c):
                await t.stop()
    run(main)


def test_a_frame_holding_a_batch_damaged_on_the_way_is_refused_with_its_connection() -> None:
    """A DATA entry whose record batch fails its CRC32C (a bit flipped between the leader's check
    and here) is never delivered, nor is anything else of its frame: the connection is dropped,
    the sender dials again, and an intact copy sent then arrives."""
    async def main() -> None:
        (a, b), (_, ib) = await _mesh(2)
        try:
            good = _batch(b"intact value")
            damaged = bytearray(good)
            damaged[-3] ^= 0x01  # in the record's value: covered by the CRC, still parses
            assert a.send("s", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=0))
            await ib.wait_count(1)
            # In one frame with the damaged entry: refused with it.
            assert a.send("s", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=1))
            assert a.send("s", Message(MessageType.APPEND, 2, 1, 1, index=0,
                                       entries=[Entry(1, 1, EntryType.DATA, bytes(damaged))]))
            await _until(lambda: a.stats(2).connects == 2 and a.is_connected(2))
            assert a.send("s", Message(MessageType.APPEND, 2, 1, 1, index=0,
                                       entries=[Entry(1, 1, EntryType.DATA, good)]))
            await ib.wait_count(2)
            assert [(m.type, [bytes(e.data) for e in m.entries]) for _, m in ib.items] == [
                (MessageType.HEARTBEAT, []), (MessageType.APPEND, [good])]
            assert b.stats(1).frames_received == 2
        finally:
            await a.stop()
            await b.stop()
    run(main)


def test_entries_with_their_checksums_arrive_checked_and_a_stale_one_is_refused() -> None:
    """At frame version ENTRY_CHECKSUMS an entry arrives with the checksum its sender's log stored
    it under, checked. One whose payload changed after that checksum was taken (damage in the
    sender's memory after its append) is refused with its frame and connection, and an intact
    copy sent then arrives."""
    async def main() -> None:
        (a, b), (_, ib) = await _mesh(2)
        a.frame_version = b.frame_version = lambda: ENTRY_CHECKSUMS
        try:
            good = _batch(b"intact value")
            # A valid record batch of its own (its CRC32C matches), under the checksum of another.
            taken = entry_checksum(Entry(1, 1, EntryType.DATA, good))
            stale = Entry(1, 1, EntryType.DATA, _batch(b"intact valuf"), crc=taken)
            assert a.send("s", Message(MessageType.APPEND, 2, 1, 1, index=0, entries=[stale]))
            await _until(lambda: a.stats(2).connects == 2 and a.is_connected(2))
            assert b.stats(1).refused == 1 and ib.items == []
            sent = Entry(1, 1, EntryType.DATA, good)
            assert a.send("s", Message(MessageType.APPEND, 2, 1, 1, index=0, entries=[sent]))
            await ib.wait_count(1)
            (_, message), = ib.items
            assert [(bytes(e.data), e.crc) for e in message.entries] == [(good, sent.crc)]
            assert sent.crc == entry_checksum(Entry(1, 1, EntryType.DATA, good))
        finally:
            await a.stop()
            await b.stop()
    run(main)


def test_heartbeats_of_many_groups_coalesce_into_one_frame() -> None:
    async def main() -> None:
        (a, b), (_, ib) = await _mesh(2)
        try:
            before = a.stats(2).frames_sent
            for g in range(200):  # one tick: every group's heartbeat in the same loop iteration
                a.send(f"stream-{g}", Message(MessageType.HEARTBEAT, 2, 1, 5, commit=g))
            await ib.wait_count(200)
            assert a.stats(2).frames_sent == before + 1
            assert b.stats(1).frames_received == 1
            assert a.stats(2).messages_sent == 200
        finally:
            await a.stop()
            await b.stop()
    run(main)


def test_drop_when_down_and_reconnect_after_restart() -> None:
    async def main() -> None:
        (a, b), (ia, ib) = await _mesh(2)
        port_b = b.port
        await b.stop()
        await _until(lambda: not a.is_connected(2))
        assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1)) is False  # dropped, not queued
        assert a.stats(2).dropped == 1
        ib2 = type(ib)()
        b2 = RaftTransport(2, ("127.0.0.1", port_b), ib2, config=FAST)
        await b2.start()
        b2.add_peer(1, ("127.0.0.1", a.port))
        try:
            await _until(lambda: a.is_connected(2) and b2.is_connected(1))
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1))
            assert b2.send("g", Message(MessageType.HEARTBEAT_RESPONSE, 1, 2, 1))
            await ib2.wait_count(1)
            await ia.wait_count(1)
            assert a.stats(2).connects == 2
        finally:
            await a.stop()
            await b2.stop()
    run(main)


def test_a_leaving_notice_written_just_before_stop_arrives_and_a_restart_clears_it() -> None:
    """announce_leaving() then stop() at once (a graceful stop with no group to hand over): the
    frame still reaches both the dialing and the accepting side; a peer that connects again
    (restarted) is not leaving any more."""
    async def main() -> None:
        (a, b, c), _ = await _mesh(3)
        heard: list[tuple[int, int]] = []
        a.on_leaving = lambda peer: heard.append((1, peer))
        c.on_leaving = lambda peer: heard.append((3, peer))
        port_b = b.port
        b.announce_leaving()
        await b.stop()  # node 2 accepts node 1's connection and dials node 3's
        await _until(lambda: len(heard) == 2)
        assert sorted(heard) == [(1, 2), (3, 2)]
        assert a.is_leaving(2) and c.is_leaving(2) and not a.is_leaving(3)
        b2 = RaftTransport(2, ("127.0.0.1", port_b), Inbox(), config=FAST)
        await b2.start()
        b2.add_peer(1, ("127.0.0.1", a.port))
        b2.add_peer(3, ("127.0.0.1", c.port))
        try:
            await _until(lambda: a.is_connected(2) and c.is_connected(2))
            assert not a.is_leaving(2) and not c.is_leaving(2)
            assert sorted(heard) == [(1, 2), (3, 2)]
        finally:
            for t in (a, b2, c):
                await t.stop()
    run(main)


def test_garbage_connection_is_rejected_without_harm() -> None:
    async def main() -> None:
        (a, b), (_, ib) = await _mesh(2)
        try:
            for junk in (b"\x00\x00\x00\x05hello", b"\xff\xff\xff\xff", b"\x00\x00\x00\x06\x01\x01\x00\x00\x00\x09"):
                reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
                writer.write(junk)
                await writer.drain()
                assert await within(reader.read(), 5) == b""  # closed by b
                writer.close()
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1))
            await ib.wait_count(1)
        finally:
            await a.stop()
            await b.stop()
    run(main)



def test_write_loop_survives_uvloop_runtime_error_on_a_closed_connection() -> None:
    """Regression (fault tests: no leader elected for 15 s, a restarted follower never caught
    up): uvloop raises RuntimeError, not OSError, on a write to a connection it closed after a
    reset; that ended the peer's write loop, and nothing was ever written to the peer again,
    although its new connection was up."""
    async def main() -> None:
        (a, b), (ia, ib) = await _mesh(2)
        try:
            old = a._peers[2].writer
            assert old is not None

            def closed_handle(*_: object) -> None:  # what uvloop does once it closed the handle
                raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; "
                                   "the handler is closed")

            old.write = closed_handle  # type: ignore[method-assign]
            old.writelines = closed_handle  # type: ignore[method-assign]
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=1))  # lost with it
            await _until(lambda: a.stats(2).connects == 2 and a.is_connected(2) and b.is_connected(1))
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=2))
            await ib.wait_count(1)
            assert [m.commit for _, m in ib.items] == [2]
            assert b.send("g", Message(MessageType.HEARTBEAT_RESPONSE, 1, 2, 1, index=2))
            await ia.wait_count(1)
        finally:
            for t in (a, b):
                await t.stop()
    run(main)


def test_dial_loop_survives_a_connection_closed_before_the_hello(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (fault tests: a restarted node never heard from the leader, "starting without
    the cluster metadata"): a connection reset right after connect (the backlog of a peer being
    killed) made uvloop raise RuntimeError on the HELLO write, which ended the dial loop: the
    lower-id node never dialed that peer again."""
    real_open = asyncio.open_connection
    calls = 0

    async def open_connection(*args: object, **kwargs: object) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        nonlocal calls
        calls += 1
        reader, writer = await real_open(*args, **kwargs)  # type: ignore[arg-type]
        if calls == 1:
            def closed_handle(*_: object) -> None:  # what uvloop does once it closed the handle
                raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; "
                                   "the handler is closed")
            writer.write = closed_handle  # type: ignore[method-assign]
        return reader, writer

    async def main() -> None:
        monkeypatch.setattr(asyncio, "open_connection", open_connection)
        (a, b), (_, ib) = await _mesh(2)
        try:
            assert calls >= 2
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=7))
            await ib.wait_count(1)
        finally:
            for t in (a, b):
                await t.stop()
    run(main)


def test_stop_ends_a_dial_cancelled_just_as_its_connection_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (CI: a node stopped in an integration test hung for 60 s): Python 3.11's
    asyncio.wait_for returns the result, swallowing the cancellation, when the awaited
    connection completes just as the dialing task is cancelled. The dial loop then attached
    the connection and waited on it forever, and stop() waited on the dial loop."""
    real_open = asyncio.open_connection
    cancelled: list[asyncio.Task[object]] = []

    async def open_connection(*args: object, **kwargs: object) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        connection = await real_open(*args, **kwargs)  # type: ignore[arg-type]
        # stop() cancelling the dial loop at this very moment, as it did in CI
        for task in asyncio.all_tasks():
            if task.get_coro().__qualname__ == "RaftTransport._dial_loop" and not cancelled:  # type: ignore[union-attr]
                cancelled.append(task)
                task.cancel()
        return connection

    async def main() -> None:
        a = RaftTransport(1, ("127.0.0.1", 0), Inbox(), config=FAST)
        b = RaftTransport(2, ("127.0.0.1", 0), Inbox(), config=FAST)
        for t in (a, b):
            await t.start()
        monkeypatch.setattr(asyncio, "open_connection", open_connection)
        try:
            b.add_peer(1, ("127.0.0.1", a.port))
            a.add_peer(2, ("127.0.0.1", b.port))
            await _until(lambda: bool(cancelled))
            done, _ = await asyncio.wait(cancelled, timeout=5)
            assert done == set(cancelled), "the cancelled dial loop kept running"
            assert cancelled[0].cancelled()
        finally:
            await within(a.stop(), 5)
            await b.stop()
    run(main)


def test_dial_loop_survives_any_error_while_dialing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (chaos campaign: after a peer reset every connection for a while, the lower-id
    node never dialed it again and the peer, restarted, never learned the metadata): uvloop's
    get_extra_info("peername") raises AttributeError on a connection reset right after
    connect, which escaped the dial loop. Any error of one attempt is now a failed attempt."""
    real_open = asyncio.open_connection
    calls = 0

    async def open_connection(*args: object, **kwargs: object) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ValueError("an error nobody anticipated")
        reader, writer = await real_open(*args, **kwargs)  # type: ignore[arg-type]
        if calls == 1:
            def reset_socket(*_: object) -> None:  # what uvloop does once the socket is gone
                raise AttributeError("'NoneType' object has no attribute 'getpeername'")
            writer.get_extra_info = reset_socket  # type: ignore[method-assign,assignment]
        return reader, writer

    async def main() -> None:
        monkeypatch.setattr(asyncio, "open_connection", open_connection)
        (a, b), (_, ib) = await _mesh(2)
        try:
            assert calls >= 3
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=7))
            await ib.wait_count(1)
        finally:
            for t in (a, b):
                await t.stop()
    run(main)


def test_a_peer_resetting_every_connection_is_dialed_with_backoff() -> None:
    """A peer that accepts and resets at once (a firewall rejecting with tcp-reset, a node
    mid-restart) was redialed in a tight loop, hundreds of times a second; now each
    connection that dies at once counts as a failed dial and backs off."""
    async def main() -> None:
        accepted = 0

        async def reset_at_once(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal accepted
            accepted += 1
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

        server = await asyncio.start_server(reset_at_once, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        a = RaftTransport(1, ("127.0.0.1", 0), Inbox(), config=FAST)
        try:
            await a.start()
            a.add_peer(2, ("127.0.0.1", port))
            await _until(lambda: accepted >= 3)
            window_start, count_start = asyncio.get_running_loop().time(), accepted
            await asyncio.sleep(1.0)  # an observation window, not a synchronization
            rate = (accepted - count_start) / (asyncio.get_running_loop().time() - window_start)
            # FAST backs off up to 0.1 s (x0.5-1.5): about 13 dials a second at most.
            assert rate < 40, f"{rate:.0f} dials a second"
        finally:
            await a.stop()
            server.close()
    run(main)


def test_a_peer_at_a_stale_address_is_reached_at_its_configured_one() -> None:
    """The address the metadata gave (add_peer) answers nothing -- the whole cluster moved --
    and the one this node's configuration names does: the peer is reached there (it was dialed
    at the stale one only, forever)."""
    async def main() -> None:
        ib = Inbox()
        b = RaftTransport(2, ("127.0.0.1", 0), ib, config=FAST)
        await b.start()
        a = RaftTransport(1, ("127.0.0.1", 0), Inbox(), peers={2: ("127.0.0.1", b.port)}, config=FAST)
        await a.start()
        b.add_peer(1, ("127.0.0.1", a.port))
        try:
            with socket.socket() as stale:  # bound, never listening: a dial there is refused
                stale.bind(("127.0.0.1", 0))
                a.add_peer(2, stale.getsockname())
                await _until(lambda: a.is_connected(2))
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 7))
            await ib.wait_count(1)
            assert [(g, m.sender, m.term) for g, m in ib.items] == [("g", 1, 7)]
        finally:
            await a.stop()
            await b.stop()
    run(main)


def test_a_stale_address_now_used_by_another_node_is_left_for_the_configured_one() -> None:
    """The metadata's address of node 2 is node 3's now (ports reused after a move): that
    connection is dropped at node 3's first frame and node 2 is dialed at its configured
    address instead; node 3 handles nothing meant for node 2."""
    async def main() -> None:
        ib, ic = Inbox(), Inbox()
        b = RaftTransport(2, ("127.0.0.1", 0), ib, config=FAST)
        c = RaftTransport(3, ("127.0.0.1", 0), ic, config=FAST)
        await b.start()
        await c.start()
        a = RaftTransport(1, ("127.0.0.1", 0), Inbox(), peers={2: ("127.0.0.1", b.port), 3: ("127.0.0.1", c.port)},
                          config=FAST)
        await a.start()
        b.add_peer(1, ("127.0.0.1", a.port))
        c.add_peer(1, ("127.0.0.1", a.port))
        try:
            a.add_peer(2, ("127.0.0.1", c.port))
            await _until(lambda: b.is_connected(1), timeout=10)
            await _until(lambda: a.is_connected(2) and a.is_connected(3))
            assert a.send("g", Message(MessageType.HEARTBEAT, 2, 1, 7))
            assert a.send("g", Message(MessageType.HEARTBEAT, 3, 1, 8))
            await ib.wait_count(1)
            await ic.wait_count(1)
            assert [(m.to, m.term) for _, m in ib.items] == [(2, 7)]
            assert [(m.to, m.term) for _, m in ic.items] == [(3, 8)]
            assert a.stats(2).connects == 2  # node 3's answer first, then node 2's
        finally:
            for t in (a, b, c):
                await t.stop()
    run(main)


def test_a_short_message_right_after_a_long_append_is_delivered_at_once() -> None:
    """A plain connection's reader asks the kernel to wake it only once a long append's body is
    in (SO_RCVLOWAT); once that frame is whole, the next frame wakes it at its first byte. A mark
    left at the long body's rest would hold a heartbeat after it until that many more bytes came,
    which nothing may send: a stalled follower."""
    async def main() -> None:
        (a, b), (_, ib) = await _mesh(2)
        try:
            payload = _batch(b"L" * 3_000_000)
            for round_number in range(3):
                assert a.send("s", Message(MessageType.APPEND, 2, 1, 1, index=round_number,
                                           entries=[Entry(round_number + 1, 1, EntryType.DATA, payload)]))
                await ib.wait_count(2 * round_number + 1)
                assert a.send("s", Message(MessageType.HEARTBEAT, 2, 1, 1, commit=round_number))
                await ib.wait_count(2 * round_number + 2, timeout=5.0)
            assert [(m.type, m.index if m.type == MessageType.APPEND else m.commit) for _, m in ib.items] == [
                (kind, n) for n in range(3) for kind in (MessageType.APPEND, MessageType.HEARTBEAT)]
            assert all(bytes(m.entries[0].data) == payload for _, m in ib.items if m.type == MessageType.APPEND)
        finally:
            for t in (a, b):
                await t.stop()
    run(main)
