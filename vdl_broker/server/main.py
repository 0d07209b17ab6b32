"""`vdl-broker`: start one node of a VDL cluster (without a cluster section: a cluster of one).

    vdl-broker --data-dir DIR --listen 127.0.0.1:9092 [--config node.toml] [...]

Prints "vdl-broker listening on HOST:PORT" once it accepts connections. SIGTERM/SIGINT shut
down cleanly (logs closed with their clean marker); after SIGKILL the next start recovers. A
node removed from its cluster (`vdl nodes decommission`/`remove`) stops by itself, exit code 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from vdl_broker.config import ConfigError, NodeConfig, load_config
from vdl_broker.server.broker import Broker

log = logging.getLogger("vdl_broker")


def _install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # plain asyncio works, just slower
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: NodeConfig) -> None:
    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"vdl-broker listening on {config.client_host}:{broker.port}", flush=True)
    log.info("node %d serving %d streams from %s", config.node_id, len(broker.replicas.names()), config.data_dir)
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(broker.removed.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiting in waits:
        waiting.cancel()
    log.info("shutting down")
    await broker.stop()
    log.info("stopped cleanly")


def main(argv: list[str] | None = None) -> int:
    try:
        config = load_config(argv)
    except ConfigError as error:
        print(f"vdl-broker: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _install_event_loop_policy()
    try:
        asyncio.run(serve(config))
    except OSError as error:
        print(f"vdl-broker: cannot start: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
