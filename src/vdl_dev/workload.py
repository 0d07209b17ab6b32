"""A realistic, deterministic order workload for the demo, and a fast producer for it.

Every event is a JSON order keyed by its customer id, with an event time that runs at a fixed
rate from a fixed start and arrives up to `max_lateness_ms` out of order (less than the
pipeline's watermark delay, so no event is ever dropped as late and the expected aggregates are
a plain group-by). Events are generated in fixed-size chunks, each from its own seeded random
generator, so event i is the same whatever chunk or batch sizes a caller uses.

The oracle (`expected_aggregates`) recomputes the pipeline's result in plain Python from the
JSON bytes: the demo test compares the Delta table with it.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CHUNK = 50_000  # events per generator chunk; part of the workload's definition (determinism)
WINDOW_MS = 60_000  # the pipeline's tumbling window (1 minute)
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

CATEGORIES = ("books", "electronics", "fashion", "garden", "grocery", "home", "sports", "toys")
CATEGORY_WEIGHTS = (0.14, 0.12, 0.16, 0.06, 0.22, 0.12, 0.10, 0.08)
DEPARTMENTS = {"books": "media", "electronics": "tech", "fashion": "apparel", "garden": "outdoor",
               "grocery": "food", "home": "household", "sports": "outdoor", "toys": "kids"}
COUNTRIES = ("DE", "FR", "GB", "US", "ES", "IT", "NL", "PL", "SE", "JP")
COUNTRY_WEIGHTS = (0.2, 0.12, 0.14, 0.22, 0.07, 0.07, 0.06, 0.05, 0.03, 0.04)
REGIONS = {"DE": "EMEA", "FR": "EMEA", "GB": "EMEA", "ES": "EMEA", "IT": "EMEA", "NL": "EMEA",
           "PL": "EMEA", "SE": "EMEA", "US": "AMER", "JP": "APAC"}
PAYMENTS = ("card", "paypal", "invoice", "wallet")
QUANTITIES = (1, 2, 3, 4, 5)
QUANTITY_WEIGHTS = (0.55, 0.2, 0.12, 0.08, 0.05)
PRODUCTS_PER_CATEGORY = 50
BASE_PRICE_CENTS = (1299, 14999, 3999, 2499, 399, 2999, 4499, 1999)  # per category


@dataclass(frozen=True)
class WorkloadConfig:
    records: int = 1_000_000
    seed: int = 42
    start_ms: int = START_MS
    events_per_second: int = 100  # event-time rate: 1M events span ~2.8 hours of event time
    max_lateness_ms: int = 5_000  # out-of-order bound; the pipeline's watermark delay is larger
    customers: int = 20_000


@dataclass
class EventChunk:
    """Events [first, first + count) as parallel columns; keys and values are Arrow binary."""

    first: int
    keys: pa.Array
    values: pa.Array

    @property
    def count(self) -> int:
        return len(self.values)


def _price_table(seed: int) -> np.ndarray:
    """Unit price in cents per (category, product): a product keeps its price for the whole run."""
    rng = np.random.default_rng([seed, 0x9E3779B9])
    spread = rng.uniform(0.5, 1.8, size=(len(CATEGORIES), PRODUCTS_PER_CATEGORY))
    return np.round(np.array(BASE_PRICE_CENTS)[:, None] * spread).astype(np.int64)


def _digits(values: np.ndarray, width: int = 0) -> pa.Array:
    """Non-negative integers as decimal text, zero-padded to at least `width` digits (f"{v:0{width}d}")."""
    text = pc.cast(pa.array(values), pa.string())
    return pc.utf8_lpad(text, width=width, padding="0") if width else text


def _price(cents: np.ndarray) -> list[pa.Array | str]:
    """Cents as a JSON number of two decimals ("12.30"): the parts of the text."""
    return [_digits(cents // 100), ".", _digits(cents % 100, 2)]


def _chunk(config: WorkloadConfig, index: int, prices: np.ndarray) -> EventChunk:
    first = index * CHUNK
    count = min(CHUNK, config.records - first)
    rng = np.random.default_rng([config.seed, index])
    # Always draw a full chunk and cut it: a shorter run is then a prefix of a longer one.
    ids = np.arange(first, first + count, dtype=np.int64)
    on_time = config.start_ms + ids * 1000 // config.events_per_second
    event_ms = on_time - rng.integers(0, config.max_lateness_ms + 1, size=CHUNK)[:count]
    # A few customers order a lot (skewed like real traffic): square a uniform draw.
    customers = (rng.random(CHUNK)[:count] ** 2 * config.customers).astype(np.int64)
    categories = rng.choice(len(CATEGORIES), size=CHUNK, p=CATEGORY_WEIGHTS)[:count]
    products = rng.integers(0, PRODUCTS_PER_CATEGORY, size=CHUNK)[:count]
    quantities = rng.choice(QUANTITIES, size=CHUNK, p=QUANTITY_WEIGHTS)[:count]
    countries = rng.choice(len(COUNTRIES), size=CHUNK, p=COUNTRY_WEIGHTS)[:count]
    payments = rng.integers(0, len(PAYMENTS), size=CHUNK)[:count]
    unit_cents = prices[categories, products]
    amount_cents = unit_cents * quantities
    times = pa.array(np.datetime_as_string(event_ms.astype("datetime64[ms]"), unit="ms", timezone="UTC"))

    # The JSON text column by column with Arrow's string kernels (every field is plain ASCII): a
    # million events in ~0.9 s of CPU, where an f-string per event took 2.5-2.9 s (the demo's
    # producer generates them while Spark starts, on the same two cores).
    customer = pc.binary_join_element_wise("c-", _digits(customers, 5), "")
    category = pa.array(CATEGORIES).take(pa.array(categories))
    parts = ['{"order_id":"o-', _digits(ids, 8), '","customer_id":"', customer, '","event_time":"', times,
             '","category":"', category, '","product_id":"', category, "-", _digits(products, 3),
             '","quantity":', _digits(quantities), ',"unit_price":', *_price(unit_cents),
             ',"amount":', *_price(amount_cents), ',"country":"', pa.array(COUNTRIES).take(pa.array(countries)),
             '","payment":"', pa.array(PAYMENTS).take(pa.array(payments)), '"}']
    values = pc.binary_join_element_wise(*parts, "")
    return EventChunk(first, customer.cast(pa.binary()), values.cast(pa.binary()))


def generate(config: WorkloadConfig, start: int = 0) -> Iterator[EventChunk]:
    """The workload's events [start, config.records) in order, up to CHUNK at a time."""
    prices = _price_table(config.seed)
    for index in range(start // CHUNK, (config.records + CHUNK - 1) // CHUNK):
        chunk = _chunk(config, index, prices)
        if chunk.first < start:
            cut = start - chunk.first
            chunk = EventChunk(start, chunk.keys.slice(cut), chunk.values.slice(cut))
        yield chunk


def events(config: WorkloadConfig, start: int = 0) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) for events [start, config.records), in order (for tests and notebooks)."""
    for chunk in generate(config, start):
        yield from zip(chunk.keys.to_pylist(), chunk.values.to_pylist(), strict=True)


# -- the oracle ------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class WindowAggregate:
    """One row of the Delta table: orders per 1-minute event-time window and category."""

    window_start_ms: int
    category: str
    orders: int
    units: int
    revenue: Decimal
    max_amount: Decimal

    @property
    def window_end_ms(self) -> int:
        return self.window_start_ms + WINDOW_MS


def _cents(text: str) -> int:
    whole, _, fraction = text.partition(".")
    return int(whole) * 100 + int((fraction + "00")[:2])


def _event_ms(text: str) -> int:
    return int(np.datetime64(text.rstrip("Z"), "ms").astype(np.int64))


@dataclass
class _Totals:
    orders: int = 0
    units: int = 0
    revenue_cents: int = 0
    max_cents: int = field(default=0)


def expected_aggregates(values: Iterable[bytes]) -> list[WindowAggregate]:
    """What the pipeline must write to Delta, computed from the raw JSON values in plain Python.

    Amounts are summed in integer cents (exact), parsed from the JSON text rather than through
    float, just as Spark parses them into DECIMAL.
    """
    totals: dict[tuple[int, str], _Totals] = {}
    for value in values:
        # parse_float=str keeps the decimal text exact
        event = json.loads(value, parse_float=str)
        window = _event_ms(event["event_time"]) // WINDOW_MS * WINDOW_MS
        slot = totals.setdefault((window, event["category"]), _Totals())
        amount = _cents(str(event["amount"]))
        slot.orders += 1
        slot.units += int(event["quantity"])
        slot.revenue_cents += amount
        slot.max_cents = max(slot.max_cents, amount)
    return sorted(
        WindowAggregate(window, category, t.orders, t.units, Decimal(t.revenue_cents).scaleb(-2),
                        Decimal(t.max_cents).scaleb(-2))
        for (window, category), t in totals.items())


# -- producing -------------------------------------------------------------------------------------


@dataclass
class ProduceStats:
    records: int = 0
    batches: int = 0
    bytes: int = 0
    seconds: float = 0.0
    first_offset: int = -1
    last_offset: int = -1

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def _encoded_batches(config: WorkloadConfig, start: int, batch_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(records section, record count) per Kafka batch, cut by size only."""
    from vdl_connector.arrow import RecordColumns, cut_points

    for chunk in generate(config, start):
        columns = RecordColumns(chunk.keys, chunk.values)
        cuts = cut_points(columns.size_bounds(), batch_bytes)
        for low, high in zip([0, *cuts], [*cuts, chunk.count], strict=True):
            yield columns.encode(low, high), high - low


def produce_workload(bootstrap: str, stream: str, config: WorkloadConfig, *, start: int = 0,
                     batch_bytes: int = 1 << 20, compression: str = "zstd", progress: bool = True) -> ProduceStats:
    """Produce events [start, config.records) to `stream` with acks=all as one idempotent producer.

    Batches are encoded column-wise (vdl_connector.arrow: no per-record Python work) and
    zstd-compressed; each carries the producer id and its sequence, so a batch re-sent after a
    leader change is stored once (the client retries through leader changes). One batch is in
    flight (on a sender thread) while the next one is generated; order is kept.
    """
    from tqdm import tqdm

    from vdl_client import ClientSettings, VdlClient
    from vdl_connector.arrow import build_batch
    from vdl_dev.session import Background
    from vdl_wire.records.compression import Compression

    codec = Compression[compression.upper()]
    stats = ProduceStats()
    started = time.monotonic()
    settings = ClientSettings.from_bootstrap(bootstrap, client_id="vdl-demo")

    def account(send: Background, count: int, size: int) -> None:
        base = send.result()  # raises the sender's error here
        if base >= 0:  # -1: a retried batch the broker had already stored (offset unknown)
            stats.first_offset = base if stats.first_offset < 0 else stats.first_offset
            stats.last_offset = base + count - 1
        stats.records += count
        stats.batches += 1
        stats.bytes += size
        bar.update(count)

    # Each send runs on a daemon thread (Background), not an executor's: the interpreter joins
    # executor threads at exit, so after Ctrl-C a send still retrying against stopped brokers
    # held the exit for its whole deadline.
    with VdlClient(settings) as client, tqdm(total=config.records - start, unit=" records", unit_scale=True,
                                             desc=f"produce {stream}", disable=not progress, smoothing=0.1) as bar:
        producer_id, epoch = client.init_producer_id()
        sequence = 0
        in_flight: tuple[Background, int, int] | None = None
        for records, count in _encoded_batches(config, start, batch_bytes):
            batch = build_batch(records, count, int(time.time() * 1000), producer_id, epoch, sequence, codec)
            sequence = (sequence + count) % (1 << 31)  # KIP-98: sequences wrap at int32
            if in_flight is not None:
                account(*in_flight)  # the client serves one request at a time
            send = Background("vdl-demo-produce", functools.partial(client.produce, stream, batch, 30_000,
                                                                     time.monotonic() + 120))
            in_flight = (send, count, len(batch))
        if in_flight is not None:
            account(*in_flight)
    stats.seconds = time.monotonic() - started
    return stats


class SteadyProducer:
    """Produces the workload's events at a steady `rate` per second on a thread until stopped
    (`vdl demo --follow`): every `tick_s` the events due by then, as one batch (acks=all, one
    idempotent producer, zstd), stamped with the time it is sent, so each record's timestamp says
    when the event was produced. Event times follow the wall clock when config.start_ms is the
    start time and config.events_per_second the rate. A producer that falls behind (a stall)
    catches up in batches of at most `max_batch` events."""

    def __init__(self, bootstrap: str, stream: str, config: WorkloadConfig, rate: int, *, tick_s: float = 0.1,
                 max_batch: int = 5_000) -> None:
        import threading

        self.bootstrap, self.stream, self.config, self.rate = bootstrap, stream, config, rate
        self.tick_s, self.max_batch = tick_s, max_batch
        self.produced = 0
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vdl-steady-producer", daemon=True)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop producing; returns the number of events produced (all acknowledged), or raises
        what stopped the producer."""
        self.halt()
        if self._error is not None:
            raise self._error
        return self.produced

    def halt(self) -> None:
        """Stop producing (an error, if any, stays for stop())."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        try:
            self._produce()
        except BaseException as error:  # noqa: BLE001 - raised in stop(), on the caller's thread
            self._error = error

    def _produce(self) -> None:
        from vdl_client import ClientSettings, VdlClient
        from vdl_connector.arrow import RecordColumns, build_batch
        from vdl_wire.records.compression import Compression

        chunks = generate(self.config)
        chunk: EventChunk | None = None
        settings = ClientSettings.from_bootstrap(self.bootstrap, client_id="vdl-demo-follow")
        with VdlClient(settings) as client:
            producer_id, epoch = client.init_producer_id()
            started = time.monotonic()
            while not self._stop.is_set() and self.produced < self.config.records:
                # Each tick, what is due by then, and nothing more until the next one: sending what
                # came due during the last round trip at once would be a tiny batch per round trip.
                due = min(self.config.records, int((time.monotonic() - started) * self.rate))
                while self.produced < due and not self._stop.is_set():
                    if chunk is None or chunk.first + chunk.count <= self.produced:
                        chunk = next(chunks)
                    low = self.produced - chunk.first
                    count = min(due - self.produced, chunk.count - low, self.max_batch)
                    columns = RecordColumns(chunk.keys.slice(low, count), chunk.values.slice(low, count))
                    batch = build_batch(columns.encode(0, count), count, int(time.time() * 1000), producer_id,
                                        epoch, self.produced % (1 << 31), Compression.ZSTD)  # sequences wrap (KIP-98)
                    client.produce(self.stream, batch, 30_000, time.monotonic() + 60)
                    self.produced += count
                elapsed = time.monotonic() - started
                self._stop.wait((elapsed // self.tick_s + 1) * self.tick_s - elapsed)
