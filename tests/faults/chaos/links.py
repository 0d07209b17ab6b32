"""Node-to-node links that faults can cut: one TCP proxy per pair of nodes, on loopback.

The Raft transport keeps one connection per pair of nodes, dialled by the lower id (see
vdl_broker/raft/transport.py). Node a's config names, as node b's Raft address, the listen port
of link a-b's proxy, which relays to b's real Raft port; clients keep reaching every node's
client port directly. Each direction of a link is controlled on its own:

- "up": bytes flow, after `delay_ms` (+ up to `jitter_ms`), order kept; with `loss`, a chunk
  waits an extra 200-600 ms, as a lost TCP segment waits for its retransmission.
- "drop": a silent partition. Bytes stop being read, so they pile up in kernel buffers and the
  sender's queues, as on a network that loses every packet; nobody sees an error, and whatever
  the sender wrote is delivered, late, when the link heals, unless the connection died meanwhile.
- "reset": every connection of the link is aborted with an RST and new ones are refused the
  same way, as by a firewall rejecting with tcp-reset.

Beside those, a link can damage bytes on their way, as a flipped bit that TCP's checksum let
through would: the next time a given marker passes either way, one bit of it is flipped.

The proxies run in their own process (`python -m tests.faults.chaos.links`, JSON lines on stdin
and stdout), so relaying never waits for the test process's Python threads. `Links` is the
test-side handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, timeout 0: close() sends an RST
_RETRANSMIT_S = (0.2, 0.6)  # extra wait of a "lost" chunk (TCP's minimum RTO is 200 ms)
_CHUNK = 256 * 1024
_QUEUED_CHUNKS = 64  # per direction; past it the proxy stops reading (backpressure)

UP, DROP, RESET = "up", "drop", "reset"


@dataclass
class Direction:
    """What one direction of a link does to its bytes."""

    state: str = UP
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    flowing: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.flowing.set()

    def update(self, state: str, delay_ms: float, jitter_ms: float, loss: float) -> None:
        self.state, self.delay_ms, self.jitter_ms, self.loss = state, delay_ms, jitter_ms, loss
        if state == UP:
            self.flowing.set()
        else:
            self.flowing.clear()


class LinkProxy:
    """The proxy of one node pair: accepts the dialer's (the lower id's) connections."""

    def __init__(self, name: str, listen_port: int, target: tuple[str, int], rng: random.Random) -> None:
        self.name, self.listen_port, self.target, self.rng = name, listen_port, target, rng
        # "forward": dialer -> acceptor (lower id -> higher id); "backward": the replies' way.
        self.directions = {"forward": Direction(), "backward": Direction()}
        self.connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.server: asyncio.base_events.Server | None = None
        self.flip_marker = b""  # the next time these bytes pass, one bit of them is flipped
        self.flipped = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port, reuse_address=True)

    def set(self, direction: str, state: str, delay_ms: float = 0.0, jitter_ms: float = 0.0,
            loss: float = 0.0) -> None:
        for name in (("forward", "backward") if direction == "both" else (direction,)):
            self.directions[name].update(state, delay_ms, jitter_ms, loss)
        if state == RESET:
            for pair in list(self.connections):
                for writer in pair:
                    _reset(writer)
            self.connections.clear()

    def _damage(self, data: bytes, before: bytes) -> bytes:
        """`data`, with a bit of the flip marker's last byte flipped if the marker ends in it
        (`before`: the bytes this direction passed just before, so a marker split between two
        reads is found too)."""
        marker = self.flip_marker
        tail = before[max(0, len(before) - len(marker) + 1):]  # too short to hold the marker whole
        found = (tail + data).find(marker) if marker else -1
        if found < 0:
            return data
        self.flip_marker, self.flipped = b"", self.flipped + 1
        at = found + len(marker) - 1 - len(tail)
        return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]

    def _resetting(self) -> bool:
        return any(d.state == RESET for d in self.directions.values())

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._resetting():
            _reset(writer)
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)  # the node is down: the dialer sees what it would see without us
            return
        pair = (writer, upstream_writer)
        self.connections.add(pair)
        pumps = [asyncio.ensure_future(self._pump(reader, upstream_writer, self.directions["forward"], pair)),
                 asyncio.ensure_future(self._pump(upstream_reader, writer, self.directions["backward"], pair))]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        self.connections.discard(pair)
        for side in pair:
            side.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, direction: Direction,
                    pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUED_CHUNKS)
        writer = asyncio.ensure_future(self._deliver(queue, sink, direction, pair))
        last_release = 0.0
        before = b""
        try:
            while True:
                # A dropped direction stops reading: the sender's bytes wait in the kernel.
                await direction.flowing.wait()
                data = await source.read(_CHUNK)
                if not data:
                    await queue.put((0.0, b""))
                    await writer
                    return
                data, before = self._damage(data, before), data
                delay = direction.delay_ms + self.rng.uniform(0, direction.jitter_ms)
                if direction.loss and self.rng.random() < direction.loss:
                    delay += 1000 * self.rng.uniform(*_RETRANSMIT_S)
                last_release = max(last_release, time.monotonic() + delay / 1000)
                await queue.put((last_release, data))
        finally:
            writer.cancel()

    async def _deliver(self, queue: asyncio.Queue[tuple[float, bytes]], sink: asyncio.StreamWriter,
                       direction: Direction, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        while True:
            release, data = await queue.get()
            if not data:
                with contextlib.suppress(OSError, RuntimeError):
                    sink.write_eof()
                return
            wait = release - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await direction.flowing.wait()  # bytes read just before a drop wait for the heal too
            if pair not in self.connections:
                return
            sink.write(data)
            await sink.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    writer.transport.abort()


async def _serve(routes: list[dict[str, Any]], seed: int) -> None:
    rng = random.Random(seed)
    proxies: dict[str, LinkProxy] = {}
    for route in routes:
        host, port = route["target"].rsplit(":", 1)
        proxy = LinkProxy(route["name"], int(route["listen"]), (host, int(port)), rng)
        await proxy.start()
        proxies[route["name"]] = proxy
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    _reply({"ready": True})
    while line := await stdin.readline():
        command = json.loads(line)
        try:
            proxy = proxies[command["link"]]
            if "flip" in command:
                proxy.flip_marker = bytes.fromhex(command["flip"])
            elif "state" in command:
                proxy.set(command["direction"], command["state"], float(command.get("delay_ms", 0)),
                          float(command.get("jitter_ms", 0)), float(command.get("loss", 0)))
            _reply({"ok": True, "flipped": proxy.flipped})
        except (KeyError, ValueError) as error:
            _reply({"ok": False, "error": repr(error)})


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------ test side


def link_name(a: int, b: int) -> str:
    low, high = sorted((a, b))
    return f"{low}-{high}"


class Links:
    """The proxies of every node pair of a cluster, and the faults on them."""

    def __init__(self, node_ids: Iterable[int], raft_address: dict[int, str], listen_ports: dict[str, int],
                 seed: int, log_path: Path | None = None) -> None:
        self.node_ids = sorted(node_ids)
        self.listen_ports = listen_ports
        routes = [{"name": link_name(a, b), "listen": listen_ports[link_name(a, b)], "target": raft_address[b]}
                  for a in self.node_ids for b in self.node_ids if a < b]
        self.process = subprocess.Popen([sys.executable, "-m", "tests.faults.chaos.links", str(seed)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        stderr=open(log_path, "a") if log_path else None,  # noqa: SIM115
                                        cwd=Path(__file__).resolve().parents[3])
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(routes) + "\n")
        self.process.stdin.flush()
        ready = json.loads(self.process.stdout.readline() or "{}")
        if not ready.get("ready"):
            raise RuntimeError("the link proxies did not start")
        self.faulty: set[str] = set()

    def proxy_address(self, a: int, b: int) -> str:
        return f"127.0.0.1:{self.listen_ports[link_name(a, b)]}"

    def _command(self, a: int, b: int, direction: str, state: str, **shape: float) -> None:
        self._ask({"link": link_name(a, b), "direction": direction, "state": state, **shape})
        if state == UP and not shape:
            self.faulty.discard(link_name(a, b))
        else:
            self.faulty.add(link_name(a, b))

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline() or "{}")
        if not answer.get("ok"):
            raise RuntimeError(f"link command {command} failed: {answer}")
        return answer

    def flip(self, a: int, b: int, marker: bytes) -> None:
        """The next time `marker` passes a-b (either way), one bit of it is flipped."""
        self._ask({"link": link_name(a, b), "flip": marker.hex()})

    def flipped(self, a: int, b: int) -> int:
        """How many markers a-b has damaged."""
        return int(self._ask({"link": link_name(a, b)})["flipped"])

    def cut(self, a: int, b: int, mode: str = DROP, one_way: bool = False) -> None:
        """Cut a-b (both ways, or only a's messages to b with `one_way`)."""
        direction = "both" if not one_way else ("forward" if a < b else "backward")
        self._command(a, b, direction, mode)

    def shape(self, a: int, b: int, delay_ms: float, jitter_ms: float = 0.0, loss: float = 0.0) -> None:
        self._command(a, b, "both", UP, delay_ms=delay_ms, jitter_ms=jitter_ms, loss=loss)

    def partition(self, groups: Iterable[Iterable[int]], mode: str = DROP) -> None:
        """Cut every link between nodes of different groups (nodes in no group keep all links)."""
        side = {node: i for i, group in enumerate(groups) for node in group}
        for a in self.node_ids:
            for b in self.node_ids:
                if a < b and a in side and b in side and side[a] != side[b]:
                    self.cut(a, b, mode)

    def heal(self) -> None:
        for a in self.node_ids:
            for b in self.node_ids:
                if a < b and link_name(a, b) in self.faulty:
                    self._command(a, b, "both", UP)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    routes = json.loads(sys.stdin.readline())
    asyncio.run(_serve(routes, seed))


if __name__ == "__main__":
    main()
