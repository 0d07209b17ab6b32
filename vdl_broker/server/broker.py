"""The single-node broker: its streams, group coordinator, producer ids and listening socket."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from vdl_broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from vdl_broker.server.config import BrokerConfig
from vdl_broker.server.handlers import Handler, build_handlers
from vdl_broker.server.producer_state import ProducerIdAllocator
from vdl_broker.server.streams import StreamRegistry

if TYPE_CHECKING:
    from vdl_broker.server.connection import KafkaConnection

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = f"vdl-{config.node_id}"
        self.streams = StreamRegistry(config)
        self.coordinator = GroupCoordinator(CoordinatorConfig(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms))
        self.producer_ids = ProducerIdAllocator(start_ms=int(time.time() * 1000))
        self.handlers: dict[int, Handler] = build_handlers()
        self.connections: set[KafkaConnection] = set()
        self.server: asyncio.Server | None = None
        self.port = config.port
        self._retention_task: asyncio.Task[None] | None = None

    @property
    def advertised_host(self) -> str:
        return self.config.client_host

    async def start(self) -> None:
        from vdl_broker.server.connection import KafkaConnection

        self.streams.open_all()
        for partition in self.streams.all():
            for producer_id in partition.producers.producer_ids():
                self.producer_ids.observe(producer_id)
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(lambda: KafkaConnection(self), self.config.host,
                                                   self.config.port, reuse_address=True, backlog=1024)
        except OSError:
            self.streams.close()  # leave the logs cleanly closed when the port is taken
            raise
        sockets = self.server.sockets or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        if self.config.retention_ms >= 0 or self.config.retention_bytes >= 0:
            self._retention_task = loop.create_task(self._retention_loop())

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retention_check_ms / 1000)
            try:
                self.streams.apply_retention()
            except Exception:
                log.exception("retention pass failed")

    async def stop(self) -> None:
        if self._retention_task:
            self._retention_task.cancel()
        if self.server is not None:
            self.server.close()
        for connection in list(self.connections):
            connection.close("broker shutting down")
        self.coordinator.close()
        # Flush and close every log: close() syncs and writes the clean-shutdown marker.
        self.streams.close()
        if self.server is not None:
            try:
                await asyncio.wait_for(self.server.wait_closed(), 2)
            except TimeoutError:
                pass
