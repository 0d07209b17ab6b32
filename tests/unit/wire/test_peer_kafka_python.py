"""Peer bytes with kafka-python 3.x, both directions, for every API x version it implements.

Values come from our declaration-derived strategies; they are converted field by field into
kafka-python's own data classes (nested classes looked up by Kafka struct name on the parent, as
kafka-python generates them), so each side encodes with its own code:
  kafka-python encode -> our decode == value, and our encode -> kafka-python decode == value.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from vdl_wire.api import decode_request, decode_response, encode_request, encode_response
from vdl_wire.codec import decode_message, encode_message
from vdl_wire.headers import RequestHeader
from vdl_wire.messages import MESSAGE_PAIRS
from vdl_wire.schema import Array, Struct

with warnings.catch_warnings():
    # kafka-python's JSON loader uses a deprecated importlib.resources API at import time.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol as kp_protocol

try:
    from .codec_strategies import sample_value, struct_classes, value_strategy
except ImportError:  # rootdir-style test import (no package)
    from codec_strategies import sample_value, struct_classes, value_strategy


def _import_quietly(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def _kafka_python_classes() -> dict[str, type]:
    wanted = {cls.__name__ for pair in MESSAGE_PAIRS for cls in pair}
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(kp_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or "generate" in info.name:
            continue
        module = _import_quietly(info.name)
        for name in wanted - found.keys():
            if hasattr(module, name):
                found[name] = getattr(module, name)
    return found


KP = _kafka_python_classes()
# kafka-python loads message JSON lazily with a deprecated importlib.resources call.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CASES = [
    (cls, v)
    for pair in MESSAGE_PAIRS
    for cls in pair
    if cls.__name__ in KP
    for v in range(cls.VERSIONS.low, min(cls.VERSIONS.high, KP[cls.__name__].max_version) + 1)
]
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]
PEER = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _join(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


# kafka-python patches Kafka's authorized-operations int32 fields into a renamed "bitfield"
# (a set of bit numbers; {31} i.e. INT32_MIN "not requested" becomes None).
BITFIELDS = {
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("MetadataResponseTopic", "topic_authorized_operations"): "authorized_operations",
    ("DescribedGroup", "authorized_operations"): "authorized_operations",
    ("DescribeClusterResponse", "cluster_authorized_operations"): "authorized_operations",
}


def _int_to_bits(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _bits_to_int(bits: set[int] | None) -> int:
    raw = sum(1 << i for i in ({31} if bits is None else bits))
    return raw - (1 << 32) if raw >= 1 << 31 else raw


def _to_kp_value(ftype: Any, value: Any, kp_parent: type, version: int) -> Any:
    if value is None:
        return None
    if isinstance(ftype, Array):
        return [_to_kp_value(ftype.element, v, kp_parent, version) for v in value]
    if isinstance(ftype, Struct):
        return _to_kp_struct(ftype, value, getattr(kp_parent, ftype.name), version)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


# VDL's own tagged fields on Kafka's messages, which Kafka's decoders skip as unknown tags (KIP-482).
VDL_FIELDS = {"DescribeProducersRequest": ("vdl_producer_ids",)}


def kafka_value(cls: type, value: Any) -> Any:
    """`value` without VDL's own fields: what a Kafka client can say."""
    fields = VDL_FIELDS.get(cls.__name__, ())
    return dataclasses.replace(value, **dict.fromkeys(fields)) if fields else value


def _to_kp_struct(s: Struct, value: Any, kp_cls: type, version: int) -> Any:
    kwargs = {}
    for f in s.fields:
        if version not in f.versions or f.name in VDL_FIELDS.get(s.name, ()):
            continue
        renamed = BITFIELDS.get((s.name, f.name))
        if renamed:
            kwargs[renamed] = _int_to_bits(getattr(value, f.name))
        else:
            kwargs[f.name] = _to_kp_value(f.type, getattr(value, f.name), kp_cls, version)
    return kp_cls(**kwargs)


def _from_kp_value(ftype: Any, value: Any, classes: dict[str, type], version: int) -> Any:
    if value is None:
        return None
    if isinstance(ftype, Array):
        return [_from_kp_value(ftype.element, v, classes, version) for v in value]
    if isinstance(ftype, Struct):
        return _from_kp_struct(ftype, value, classes, version)
    return value


def _from_kp_struct(s: Struct, value: Any, classes: dict[str, type], version: int) -> Any:
    kwargs = {}
    for f in s.fields:
        if version not in f.versions or f.name in VDL_FIELDS.get(s.name, ()):
            continue
        renamed = BITFIELDS.get((s.name, f.name))
        if renamed:
            kwargs[f.name] = _bits_to_int(getattr(value, renamed))
        else:
            kwargs[f.name] = _from_kp_value(f.type, getattr(value, f.name), classes, version)
    return classes[s.name](**kwargs)


def to_kafka_python(cls: type, version: int, value: Any) -> Any:
    kp_cls = KP[cls.__name__][version]
    return _to_kp_struct(cls.DECL.root, value, kp_cls, version)


def from_kafka_python(cls: type, version: int, kp_value: Any) -> Any:
    return _from_kp_struct(cls.DECL.root, kp_value, struct_classes(cls), version)


def _check_both_directions(cls: type, version: int, value: Any) -> None:
    if cls.__name__ == "ApiVersionsResponse":
        # Clients decode an ApiVersions error response as v0 (KIP-511); peer-check success bodies.
        value = dataclasses.replace(value, error_code=0)
    if cls.__name__ in VDL_FIELDS:
        # With VDL's own fields set, kafka-python reads our bytes as the message without them.
        kp_decoded = KP[cls.__name__].decode(_join(encode_message(cls, version, value)), version=version)
        value = kafka_value(cls, value)
        assert from_kafka_python(cls, version, kp_decoded) == value
    kp_bytes = bytes(to_kafka_python(cls, version, value).encode(version=version))
    ours = _join(encode_message(cls, version, value))
    assert ours == kp_bytes
    decoded, _ = decode_message(cls, version, kp_bytes, exact=True)
    assert decoded == value
    kp_decoded = KP[cls.__name__].decode(ours, version=version)
    assert from_kafka_python(cls, version, kp_decoded) == value


# VDL's own API (protocol/messages/vdl_nodes.py): no Kafka client implements it.
VDL_ONLY = {"VdlNodesRequest", "VdlNodesResponse", "VdlWriterIdRequest", "VdlWriterIdResponse"}
# KIP-848's APIs, which kafka-python 3.0 does not implement: Kafka's Java client exercises them
# (tests/integration/test_java_client.py).
NOT_IN_KAFKA_PYTHON = {"ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
                       "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"}


def test_kafka_python_covers_every_api() -> None:
    assert set(KP) == {cls.__name__ for pair in MESSAGE_PAIRS for cls in pair} - VDL_ONLY - NOT_IN_KAFKA_PYTHON


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_peer_sample(cls: type, version: int) -> None:
    _check_both_directions(cls, version, sample_value(cls, version))


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_peer_generated(cls: type, version: int) -> None:
    @PEER
    @given(value_strategy(cls, version))
    def check(value: Any) -> None:
        _check_both_directions(cls, version, value)

    check()


REQUEST_CASES = [(c, v) for c, v in CASES if c.__name__.endswith("Request")]


@pytest.mark.parametrize(
    ("cls", "version"), REQUEST_CASES, ids=[f"{c.__name__}-v{v}" for c, v in REQUEST_CASES]
)
def test_peer_frames_with_headers(cls: type, version: int) -> None:
    """Whole frames: kafka-python's framed request decodes in decode_request; our response
    (with the right response header version) decodes in kafka-python."""
    request = kafka_value(cls, sample_value(cls, version))
    kp_request = to_kafka_python(cls, version, request)
    kp_request.with_header(correlation_id=4242, client_id="kp-client")
    frame = bytes(kp_request.encode(header=True, framed=True))
    assert frame == _join(encode_request(cls.API_KEY, version, 4242, "kp-client", request))
    header, decoded = decode_request(frame[4:])
    assert header == RequestHeader(
        request_api_key=cls.API_KEY, request_api_version=version, correlation_id=4242, client_id="kp-client"
    )
    assert decoded == request

    response_cls = next(rs for rq, rs in MESSAGE_PAIRS if rq is cls)
    response = sample_value(response_cls, version)
    if response_cls.__name__ == "ApiVersionsResponse":
        response = dataclasses.replace(response, error_code=0)
    out = _join(encode_response(header, response))
    kp_response = KP[response_cls.__name__].decode(out, version=version, header=True, framed=True)
    assert kp_response.header.correlation_id == 4242
    assert from_kafka_python(response_cls, version, kp_response) == response
    kp_response_cls = KP[response_cls.__name__][version]
    kp_out = to_kafka_python(response_cls, version, response)
    kp_out.with_header(correlation_id=4242)
    kp_bytes = bytes(kp_out.encode(header=True, framed=True))
    assert kp_response_cls is not None
    assert decode_response(cls.API_KEY, version, kp_bytes[4:]) == (4242, response)


# ---- kafka-python's hand-written legacy classes (kafka.protocol.old) ---------------------------
# An independent second peer: these were written from the protocol guide per version (Fetch v0-3,
# Produce v0-2, ... that Kafka 4's JSON definitions no longer describe). Values map to nested
# tuples in declaration order.


def _old_classes() -> dict[tuple[str, int], type]:
    import kafka.protocol.old as old_pkg

    found: dict[tuple[str, int], type] = {}
    names = {cls.__name__ for pair in MESSAGE_PAIRS for cls in pair}
    for info in pkgutil.iter_modules(old_pkg.__path__, "kafka.protocol.old."):
        module = _import_quietly(info.name)
        for attr in dir(module):
            base, _, version = attr.rpartition("_v")
            if base in names and version.isdigit():
                found[base, int(version)] = getattr(module, attr)
    return found


OLD = _old_classes()
# Legacy classes that disagree with Kafka's message definitions (checked against the JSON peer
# above): DescribeLogDirsRequest_v0 declares a topic's partitions as one int32, the JSON as []int32;
# CreatePartitionsRequest_v0/1 nest count and assignments in a struct of their own (kafka-python:
# "not compatible with new protocol").
OLD_MISTAKES = {("DescribeLogDirsRequest", 0), ("CreatePartitionsRequest", 0), ("CreatePartitionsRequest", 1)}
OLD_CASES = [
    (cls, v)
    for pair in MESSAGE_PAIRS
    for cls in pair
    for v in range(cls.VERSIONS.low, cls.VERSIONS.high + 1)
    if (cls.__name__, v) in OLD and not cls.DECL.is_flexible(v) and (cls.__name__, v) not in OLD_MISTAKES
]


def _to_tuple_value(ftype: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(ftype, Array):
        return [_to_tuple_value(ftype.element, v, version) for v in value]
    if isinstance(ftype, Struct):
        items = _to_tuple_struct(ftype, value, version)
        # The legacy classes model a one-field struct array (MetadataRequest topics) as scalars.
        return items[0] if len(items) == 1 else items
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _to_tuple_struct(s: Struct, value: Any, version: int) -> tuple:
    out = []
    for f in s.fields:
        if version not in f.versions:
            continue
        if (s.name, f.name) in BITFIELDS:
            out.append(_int_to_bits(getattr(value, f.name)))
        else:
            out.append(_to_tuple_value(f.type, getattr(value, f.name), version))
    return tuple(out)


def _check_old(cls: type, version: int, value: Any) -> None:
    if cls.__name__ == "ApiVersionsResponse":
        value = dataclasses.replace(value, error_code=0)  # errors decode as v0 (KIP-511)
    old_cls = OLD[cls.__name__, version]
    expected = _to_tuple_struct(cls.DECL.root, value, version)
    old_bytes = bytes(old_cls(*expected).encode())
    ours = _join(encode_message(cls, version, value))
    assert ours == old_bytes
    assert decode_message(cls, version, old_bytes, exact=True)[0] == value
    decoded = old_cls.decode(ours)
    assert tuple(getattr(decoded, name) for name in old_cls.SCHEMA.names) == expected


def test_legacy_classes_cover_old_versions() -> None:
    covered = {(c.__name__, v) for c, v in OLD_CASES}
    for name, version in [
        ("FetchRequest", 0),
        ("FetchResponse", 3),
        ("ProduceRequest", 2),
        ("ListOffsetsResponse", 0),
    ]:
        assert (name, version) in covered


@pytest.mark.parametrize(("cls", "version"), OLD_CASES, ids=[f"{c.__name__}-v{v}-old" for c, v in OLD_CASES])
def test_peer_legacy_classes(cls: type, version: int) -> None:
    _check_old(cls, version, sample_value(cls, version))

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(value_strategy(cls, version))
    def check(value: Any) -> None:
        _check_old(cls, version, value)

    check()
