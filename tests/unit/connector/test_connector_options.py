"""Option validation: names in documented spelling, values that are accepted, Spark's rules."""

from __future__ import annotations

import pytest

from vdl_connector.options import (
    ReplicaPreference,
    VdlOptionError,
    check_batch_source,
    check_streaming_source,
    parse_duration_ms,
    parse_offset_spec,
    parse_sink_options,
    parse_source_options,
)

BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def lower(options: dict[str, str]) -> dict[str, str]:
    """Spark hands options to Python data sources lower-cased."""
    return {k.lower(): v for k, v in options.items()}


def parse(**extra: str) -> object:
    return parse_source_options(lower(BASE | extra))


def fails(match: str, options: dict[str, str]) -> None:
    with pytest.raises(VdlOptionError, match=match):
        parse_source_options(lower(options))


def test_defaults() -> None:
    options = parse()
    assert options.client.bootstrap_servers == ("127.0.0.1:9092",)
    assert options.subscription.kind == "subscribe" and options.subscription.streams == ("a", "b")
    assert options.starting is None and options.ending is None
    assert options.fail_on_data_loss is True
    assert options.include_headers is False
    assert options.max_offsets_per_trigger is None
    assert options.max_trigger_delay_ms == 15 * 60 * 1000


def test_kafka_prefixed_bootstrap_accepted() -> None:
    options = parse_source_options(lower({"kafka.bootstrap.servers": "h1:1,h2:2", "subscribe": "x"}))
    assert options.client.bootstrap_servers == ("h1:1", "h2:2")


def test_missing_bootstrap_names_option() -> None:
    fails("'bootstrap.servers'", {"subscribe": "x"})


def test_bad_bootstrap_names_option() -> None:
    fails("'bootstrap.servers' must be .*host:port", {"bootstrap.servers": "nohost", "subscribe": "x"})


@pytest.mark.parametrize("given", [
    {"subscribe": "a", "subscribePattern": "a.*"},
    {"subscribe": "a", "assign": '{"a":[0]}'},
    {},
])
def test_exactly_one_subscription(given: dict[str, str]) -> None:
    fails("exactly one of the options 'subscribe', 'subscribePattern', 'assign'",
          {"bootstrap.servers": "h:1"} | given)


def test_subscribe_pattern_and_assign() -> None:
    options = parse_source_options(lower({"bootstrap.servers": "h:1", "subscribePattern": "ev-.*"}))
    assert options.subscription.select(["ev-1", "other", "ev-0"]) == ["ev-0", "ev-1"]
    options = parse_source_options(lower({"bootstrap.servers": "h:1", "assign": '{"s1":[0],"s2":[0]}'}))
    assert options.subscription.streams == ("s1", "s2")
    fails("option 'assign'.*one partition", {"bootstrap.servers": "h:1", "assign": '{"s1":[1]}'})
    fails("option 'assign' is not valid JSON", {"bootstrap.servers": "h:1", "assign": "{s1"})
    fails("option 'subscribePattern' is not a valid regular expression",
          {"bootstrap.servers": "h:1", "subscribePattern": "(("})


def test_starting_offsets_forms() -> None:
    assert parse(startingOffsets="earliest").starting.kind == "earliest"
    assert parse(startingOffsets="LATEST").starting.kind == "latest"
    spec = parse(startingOffsets='{"a":{"0":5},"b":{"0":-2}}').starting
    assert spec.kind == "offsets" and dict(spec.per_stream) == {"a": 5, "b": -2}
    assert dict(parse(startingOffsets='{"a":7}').starting.per_stream) == {"a": 7}


@pytest.mark.parametrize("value, match", [
    ("earliset", "option 'startingOffsets' accepts 'earliest', 'latest' or JSON"),
    ('{"a":{"0":5}', "option 'startingOffsets' is not valid JSON"),
    ('{"a":{"1":5}}', "option 'startingOffsets'.*partition"),
    ('{"a":{"0":-3}}', "option 'startingOffsets'.*-3"),
    ('{"a":{"0":"x"}}', "option 'startingOffsets'.*integer"),
    ("[1]", "option 'startingOffsets'"),
])
def test_bad_starting_offsets(value: str, match: str) -> None:
    fails(match, BASE | {"startingOffsets": value})


def test_ending_offsets_rules() -> None:
    fails("option 'endingOffsets'.*'earliest' is not allowed", BASE | {"endingOffsets": "earliest"})
    fails("option 'endingOffsets': -2", BASE | {"endingOffsets": '{"a":{"0":-2}}'})
    with pytest.raises(VdlOptionError, match="'endingOffsets' is only valid for batch"):
        check_streaming_source(parse(endingOffsets="latest"))
    with pytest.raises(VdlOptionError, match="'startingOffsets': 'latest' is not allowed for batch"):
        check_batch_source(parse(startingOffsets="latest"))
    with pytest.raises(VdlOptionError, match="-1 \\(latest\\) is not allowed for batch"):
        check_batch_source(parse(startingOffsets='{"a":{"0":-1}}'))


def test_timestamps_and_precedence() -> None:
    spec = parse(startingTimestamp="1000", startingOffsets="earliest").starting
    assert spec.kind == "timestamp" and spec.timestamp == 1000
    spec = parse(startingOffsetsByTimestamp='{"a":{"0":5}}', startingOffsets="earliest").starting
    assert spec.kind == "timestamps" and dict(spec.per_stream) == {"a": 5}
    fails("option 'startingTimestamp' must be an integer", BASE | {"startingTimestamp": "soon"})
    fails("option 'startingOffsetsByTimestampStrategy' accepts 'error' or 'latest'",
          BASE | {"startingOffsetsByTimestampStrategy": "maybe"})


@pytest.mark.parametrize("name", ["maxOffsetsPerTrigger", "minOffsetsPerTrigger", "minPartitions",
                                  "maxRecordsPerPartition"])
@pytest.mark.parametrize("value", ["-1", "0", "ten"])
def test_positive_integers(name: str, value: str) -> None:
    fails(f"option '{name}' must be an integer >= 1", BASE | {name: value})


def test_booleans_and_durations() -> None:
    assert parse(failOnDataLoss="FALSE").fail_on_data_loss is False
    assert parse(includeHeaders="true").include_headers is True
    fails("option 'failOnDataLoss' must be 'true' or 'false'", BASE | {"failOnDataLoss": "yes"})
    fails("option 'maxTriggerDelay' must be a duration", BASE | {"maxTriggerDelay": "soon"})
    assert parse(maxTriggerDelay="10s").max_trigger_delay_ms == 10_000
    assert parse_duration_ms("x", "250") == 250
    assert parse_duration_ms("x", "2h") == 7_200_000


def test_fetch_settings_with_and_without_prefix() -> None:
    options = parse(**{"kafka.fetch.max.bytes": "1000", "max.partition.fetch.bytes": "500",
                       "kafkaConsumer.pollTimeoutMs": "3000"})
    assert options.fetch_max_bytes == 1000 and options.max_partition_fetch_bytes == 500
    assert options.poll_timeout_ms == 3000 and options.client.deadline_ms == 3000
    fails("option 'kafka.fetch.max.bytes' must be an integer", BASE | {"kafka.fetch.max.bytes": "lots"})


def test_prefer_replicas() -> None:
    assert parse().prefer_replicas == ReplicaPreference("any")
    assert parse(preferReplicas="Leader").prefer_replicas == ReplicaPreference("leader")
    assert parse(preferReplicas=" any ").prefer_replicas == ReplicaPreference("any")
    assert parse(preferReplicas="rack:eu-west-1a").prefer_replicas == ReplicaPreference("rack", "eu-west-1a")
    assert parse(preferReplicas="RACK:Eu-1").prefer_replicas == ReplicaPreference("rack", "Eu-1")  # names as given
    for bad in ("", "followers", "rack:", "rack: ", "rack", "nearest"):
        fails(r"option 'preferReplicas' accepts 'leader', 'any' or 'rack:<name>'", BASE | {"preferReplicas": bad})


def test_offset_spec_direct() -> None:
    assert parse_offset_spec("startingOffsets", " earliest ").kind == "earliest"


def test_sink_exactly_once_modes() -> None:
    def sink(**extra: str):  # noqa: ANN202
        return parse_sink_options(lower({"bootstrap.servers": "h:1", **extra}))

    assert (sink().exactly_once, sink().transactional) == (True, False)
    assert (sink(exactlyOnce="false").exactly_once, sink(exactlyOnce="false").transactional) == (False, False)
    transactional = sink(exactlyOnce=" Transactional ")
    assert (transactional.exactly_once, transactional.transactional) == (True, True)
    assert transactional.transaction_timeout_ms == 900_000
    assert sink(**{"kafka.transaction.timeout.ms": "60000"}).transaction_timeout_ms == 60_000
    with pytest.raises(VdlOptionError, match="option 'kafka.transaction.timeout.ms' must be at most 900000"):
        sink(**{"kafka.transaction.timeout.ms": "900001"})
    with pytest.raises(VdlOptionError, match="option 'transaction.timeout.ms' must be an integer >= 1"):
        sink(**{"transaction.timeout.ms": "0"})


def test_sink_options() -> None:
    options = parse_sink_options(lower({"bootstrap.servers": "h:1", "topic": "out", "createStreams": "true"}))
    assert options.topic == "out" and options.create_streams and options.exactly_once
    assert options.compression == "none" and options.batch_size == 4 * 1024 * 1024
    # Rows naming their streams (the topic column): 1 MiB per stream; the option wins either way.
    assert parse_sink_options(lower({"bootstrap.servers": "h:1"})).batch_size == 1024 * 1024
    assert parse_sink_options(lower({"bootstrap.servers": "h:1", "topic": "out", "kafka.batch.size": "65536"})
                              ).batch_size == 65536
    assert parse_sink_options(lower({"bootstrap.servers": "h:1", "batch.size": "65536"})).batch_size == 65536
    with pytest.raises(VdlOptionError, match="option 'kafka.compression.type' accepts"):
        parse_sink_options(lower({"bootstrap.servers": "h:1", "kafka.compression.type": "brotli"}))
    with pytest.raises(VdlOptionError, match="option 'exactlyOnce' accepts 'true', 'false', 'transactional', got '1'"):
        parse_sink_options(lower({"bootstrap.servers": "h:1", "exactlyOnce": "1"}))
    with pytest.raises(VdlOptionError, match="'bootstrap.servers'"):
        parse_sink_options({"topic": "x"})


def test_commit_offsets_to_group() -> None:
    assert parse().commit_group is None
    options = parse(commitOffsetsToGroup=" spark-orders ")
    assert options.commit_group == "spark-orders"
    check_streaming_source(options)
    with pytest.raises(VdlOptionError, match="option 'commitOffsetsToGroup' is only valid for streaming queries"):
        check_batch_source(options)
    fails("option 'commitOffsetsToGroup' must be a consumer group id", BASE | {"commitOffsetsToGroup": "  "})


def test_isolation_level() -> None:
    assert parse().client.isolation_level == 0  # read_uncommitted, as Kafka's consumer
    assert parse(**{"kafka.isolation.level": "read_committed"}).client.isolation_level == 1
    assert parse(**{"isolation.level": " READ_COMMITTED "}).client.isolation_level == 1
    assert parse(**{"kafka.isolation.level": "read_uncommitted"}).client.isolation_level == 0
    # the prefixed spelling wins, as for the connector's other kafka.* options
    assert parse(**{"kafka.isolation.level": "read_committed", "isolation.level": "read_uncommitted"}
                 ).client.isolation_level == 1
    for name in ("kafka.isolation.level", "isolation.level"):
        fails(rf"option '{name}' accepts 'read_uncommitted' or 'read_committed', got 'committed'",
              BASE | {name: "committed"})
