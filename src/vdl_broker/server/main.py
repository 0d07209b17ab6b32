"""`vdl-broker`: start one node of a VDL cluster (without a cluster section: a cluster of one).

    vdl-broker --data-dir DIR --listen 127.0.0.1:9092 [--config node.toml] [...]

Prints "vdl-broker listening on HOST:PORT" once it accepts connections. SIGTERM/SIGINT shut
down cleanly (logs closed with their clean marker), exit code 0, also while it is still starting;
after SIGKILL the next start recovers. A
node removed from its cluster (`vdl nodes decommission`/`remove`) stops by itself, exit code 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import platform
import resource
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

from vdl_broker.config import ConfigError, NodeConfig, load_config
from vdl_broker.server.broker import Broker

log = logging.getLogger("vdl_broker")

# Worker threads for blocking disk work (fsyncs of logs and hard states, opening logs). Many
# streams electing or being created at once each wait for an fsync: run side by side, the
# filesystem's journal commits them together (200 fdatasyncs: ~0.85 s one after another, ~30 ms
# from 16 threads on this machine's disk), instead of queueing behind asyncio's default 6.
IO_THREADS = 32


def _raise_open_files_limit() -> None:
    """Each stream replica keeps its active segment open: thousands of streams need more than a
    common default soft limit of 1,024 descriptors. Raise the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20  # Linux's default fs.nr_open
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as error:
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, target, error)


# glibc's mallopt parameters (malloc/malloc.h); the largest mmap threshold it takes on a 64-bit
# machine is 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX, malloc/malloc.c).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 64 << 20


def keep_freed_buffers() -> bool:
    """Have glibc hand a freed frame buffer to the next frame instead of to the kernel.

    A node reads every produce request and replicated append into a buffer of its own, which the
    log's tail cache keeps until it evicts it: megabytes allocated and freed all the time. glibc's
    own thresholds follow the largest buffer freed: it serves them from its heap, but returns the
    heap's top to the kernel whenever twice that lies free there, so about a third of the buffers
    came back as fresh pages, each faulted in again -- in a memory cgroup the log's page cache
    fills, each fault a reclaim (on a 3-node cluster under acks=all load, ~33,000 faults per 4M
    records on each node, 9% of a follower's CPU). With these thresholds about half as many, what
    the tail cache takes to fill: CPU per record 0.92x on a follower and 0.94x on the leader
    (README, "And the broker's heap"). The price: the heap keeps up to TRIM_THRESHOLD_BYTES free
    beyond what the node holds.

    An operator's own allocator settings (GLIBC_TUNABLES' malloc ones, MALLOC_*_ variables) win;
    elsewhere than on glibc nothing changes. True if the thresholds were set."""
    if platform.libc_ver()[0] != "glibc":
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "") or any(
            name.startswith("MALLOC_") and name.endswith("_") for name in os.environ):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # Setting either stops glibc from moving both (mp_.no_dyn_threshold): both are set.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def _install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # plain asyncio works, just slower
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def settle_heap() -> None:
    """Move everything alive once the node serves (modules, classes, the recovered state) out of
    the cyclic collector's reach for good (gc.freeze). Left in, each full collection walks it
    all again: 20-30 ms of CPU every few seconds under a transactional load, a stall of up to
    ~300 ms on a loaded machine (measured), on whatever request is in flight -- the tail of every
    latency. What the node allocates afterwards is collected as before. The price: a reference
    cycle among the frozen objects that becomes garbage later (a replica open at start, deleted
    since) is never freed -- bounded by the heap the node held when it started serving."""
    gc.collect()
    gc.freeze()


async def load_tiering(broker: Broker) -> None:
    """Right after the node serves, not before: the tiering libraries (tables/service.py
    `prepare`) are no step on a restart's path to serving, and still loaded at start rather
    than when the node first writes a table. Their modules then join the frozen heap too."""
    if await broker.tables.prepare():
        settle_heap()


async def serve(config: NodeConfig) -> None:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(IO_THREADS, thread_name_prefix="vdl-io"))
    broker = Broker(config)
    # From the first moment: a node still looking for its cluster or waiting for the metadata
    # (10 s) stops as cleanly as a serving one, exit code 0 (the signals' default killed it).
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    starting = asyncio.ensure_future(broker.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()  # Broker.start closes what it opened
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        log.info("node %d: stopped cleanly before serving (it was still starting)", config.node_id)
        return
    stopping.cancel()
    starting.result()  # a failed start (a port taken) raises here
    if broker.removed.is_set():  # restarted after its removal: it serves nothing, and says why
        print(f"vdl-broker: node {config.node_id} was removed from the cluster: not starting (its id cannot join "
              "again: a new node needs a new node_id and an empty data directory)", file=sys.stderr, flush=True)
        await broker.stop()
        return
    settle_heap()
    print(f"vdl-broker listening on {config.client_host}:{broker.port}", flush=True)
    # The replicas this node holds (a node that just joined holds none yet), not the cluster's streams.
    log.info("node %d serving %d streams from %s", config.node_id, len(broker.replicas.all()), config.data_dir)
    loading = asyncio.ensure_future(load_tiering(broker))
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(broker.removed.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiting in [*waits, loading]:
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
    _raise_open_files_limit()
    keep_freed_buffers()
    try:
        asyncio.run(serve(config))
    except OSError as error:
        print(f"vdl-broker: cannot start: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
