"""Leader probes: one thread per node writing one record at a time with acks=all to that node,
so the moment any node can acknowledge again is seen within a probe interval (a node that hangs
holds up only its own thread). Acknowledgements feed both the checker and the time-to-ack
measurement after each fault and heal."""

from __future__ import annotations

import bisect
import itertools
import threading
import time

from tests.faults.chaos.world import World
from tests.support.kafka import one_record_batch, produce_raw

PROBE_INTERVAL_S = 0.05
NOT_LEADER_BACKOFF_S = 0.1


class Probes:
    def __init__(self, world: World, stream: str) -> None:
        self.world, self.stream = world, stream
        self.acks: list[tuple[float, str, int, bytes]] = []  # (time, prober, offset, value)
        self.attempted: set[bytes] = set()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.counter = itertools.count()
        self.threads = [threading.Thread(target=self._run, args=(node,), daemon=True, name=f"probe-{node}")
                        for node in world.node_ids]

    def start(self) -> Probes:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(10)

    def _run(self, node: int) -> None:
        address = self.world.address(node)
        while not self.stop_event.is_set():
            if node in self.world.down or node in self.world.paused:
                self.stop_event.wait(PROBE_INTERVAL_S)
                continue
            value = f"probe{node}-{next(self.counter):08d}".encode()
            with self.lock:
                self.attempted.add(value)
            try:
                code, offset = produce_raw(address, self.stream, one_record_batch(value), acks=-1,
                                           timeout_ms=1000, socket_timeout=2.0)
            except (OSError, ValueError):
                self.stop_event.wait(PROBE_INTERVAL_S)
                continue
            if code == 0:
                with self.lock:
                    self.acks.append((time.monotonic(), f"probe{node}", offset, value))
                self.stop_event.wait(PROBE_INTERVAL_S)
            else:
                self.stop_event.wait(NOT_LEADER_BACKOFF_S)

    def first_ack_after(self, moment: float) -> float | None:
        """Time of the first acknowledgement after `moment`, if any yet."""
        with self.lock:
            times = sorted(t for t, *_ in self.acks)
        i = bisect.bisect_right(times, moment)
        return times[i] if i < len(times) else None

    def was_attempted(self, value: bytes) -> bool:
        with self.lock:
            return value in self.attempted
