"""The API table and whole-frame request/response encoding.

Server side: `decode_request(frame)` and `encode_response(header, response)`.
Client side: `encode_request(...)` and `decode_response(...)`.
Frames passed in are bodies without the 4-byte size prefix (what FrameReader yields); encoded
output includes the size prefix and is a list of buffers for writelines()/sendmsg().
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import messages as m
from .codec import Sink, decode_message, encode_into, message_class
from .errors import DecodeError, ErrorCode
from .headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from .primitives import Buffer, pack_into_i32, read_int16, read_int32


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version we serve, None if all are non-flexible
    request_class: type
    response_class: type

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def _spec(request_class: type, response_class: type) -> ApiSpec:
    decl = message_class(request_class).DECL
    low, high = decl.valid_versions.low, decl.valid_versions.high
    flex = decl.flexible_versions
    flexible_from = flex.low if not flex.empty and flex.low <= high else None
    return ApiSpec(
        decl.api_key,
        decl.name.removesuffix("Request"),
        low,
        high,
        flexible_from,
        request_class,
        response_class,
    )


API_SPECS: dict[int, ApiSpec] = {spec.api_key: spec for spec in (_spec(rq, rs) for rq, rs in m.MESSAGE_PAIRS)}


def api_spec(request_class: type) -> ApiSpec:
    """The protocol table's entry for a request class (its key, versions, response class)."""
    return API_SPECS[message_class(request_class).DECL.api_key]


# APIs this project sends at a version below the highest it serves. Produce v11+ is KIP-890's:
# v12 means transaction version 2, which vdl_client's transactional producer does not speak (the
# classic protocol must not use it within a transaction, ProduceRequest.json), and v10 is what
# earlier releases' brokers serve.
_SENT_BELOW_MAX = {m.ProduceRequest.DECL.api_key: 10}


def default_version(request_class: type) -> int:
    """The version this project speaks for an API when it sends one: the highest it declares
    (Produce: v10)."""
    spec = api_spec(request_class)
    return min(spec.max_version, _SENT_BELOW_MAX.get(spec.api_key, spec.max_version))


def supported_api_versions() -> list[tuple[int, int, int]]:
    """What we advertise in ApiVersions: (api_key, min_version, max_version), by api key."""
    return [
        (s.api_key, s.min_version, s.max_version) for s in sorted(API_SPECS.values(), key=lambda s: s.api_key)
    ]


def api_versions_response(error_code: int = ErrorCode.NONE, throttle_time_ms: int = 0) -> Any:
    """An ApiVersionsResponse listing exactly the table."""
    return m.ApiVersionsResponse(
        error_code=int(error_code),
        api_keys=[
            m.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_api_versions()
        ],
        throttle_time_ms=throttle_time_ms,
    )


class UnsupportedApiError(DecodeError):
    """A request for an API key we do not serve. Carries what the server needs to answer/log."""

    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, message: str | None = None
    ) -> None:
        super().__init__(message or f"unsupported api key {api_key} (version {api_version})", 0)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    @property
    def header(self) -> Any:
        """A RequestHeader with the ids read so far (client_id unknown)."""
        return RequestHeader(
            request_api_key=self.api_key,
            request_api_version=self.api_version,
            correlation_id=self.correlation_id,
        )


class UnsupportedVersionError(UnsupportedApiError):
    """A known API at a version outside our range.

    # KIP-511: for ApiVersions, Kafka answers a too-new version with a v0 response, error
    # UNSUPPORTED_VERSION, listing the supported ranges: `encode_unsupported_version_response`.
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        spec = API_SPECS[api_key]
        super().__init__(
            api_key,
            api_version,
            correlation_id,
            f"unsupported version {api_version} of {spec.name} (supported {spec.min_version}-{spec.max_version})",
        )


def decode_request(frame: Buffer) -> tuple[Any, Any]:
    """Parse a request frame body -> (RequestHeader, request value).

    Raises UnsupportedApiError / UnsupportedVersionError (with correlation id) or DecodeError.
    Bytes after the request body are ignored, as Kafka does.
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    api_key, pos = read_int16(buf, 0)
    api_version, pos = read_int16(buf, pos)
    correlation_id, _ = read_int32(buf, pos)
    spec = API_SPECS.get(api_key)
    if spec is None:
        raise UnsupportedApiError(api_key, api_version, correlation_id)
    if not spec.supports(api_version):
        raise UnsupportedVersionError(api_key, api_version, correlation_id)
    flexible = spec.is_flexible(api_version)
    header, pos = decode_message(RequestHeader, request_header_version(flexible), buf, 0)
    request, _ = decode_message(spec.request_class, api_version, buf, pos)
    return header, request


def _framed(encode_body: Callable[[Sink], None]) -> list[Buffer]:
    sink = Sink()
    sink.buf += b"\0\0\0\0"  # size placeholder, patched below
    first = sink.buf
    encode_body(sink)
    parts = sink.finish()
    total = sum(b.nbytes if isinstance(b, memoryview) else len(b) for b in parts)
    pack_into_i32(first, 0, total - 4)
    return parts


def encode_response(header: Any, response: Any) -> list[Buffer]:
    """Encode a response to `header`'s request (size prefix + response header + body)."""
    api_key = header.request_api_key
    version = header.request_api_version
    spec = API_SPECS[api_key]
    header_version = response_header_version(api_key, spec.is_flexible(version))
    response_header = ResponseHeader(correlation_id=header.correlation_id)

    def body(sink: Sink) -> None:
        encode_into(ResponseHeader, header_version, response_header, sink)
        encode_into(spec.response_class, version, response, sink)

    return _framed(body)


def encode_unsupported_version_response(error: UnsupportedVersionError) -> list[Buffer]:
    """The answer to an unsupported ApiVersions version: v0 body, UNSUPPORTED_VERSION, our table."""
    header = RequestHeader(request_api_key=18, request_api_version=0, correlation_id=error.correlation_id)
    return encode_response(header, api_versions_response(ErrorCode.UNSUPPORTED_VERSION))


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, request: Any
) -> list[Buffer]:
    """Client side: size prefix + request header (v1, or v2 for flexible versions) + body."""
    spec = API_SPECS.get(api_key)
    if spec is None or not spec.supports(api_version):
        raise ValueError(f"cannot encode api key {api_key} version {api_version}")
    flexible = spec.is_flexible(api_version)
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )

    def body(sink: Sink) -> None:
        encode_into(RequestHeader, request_header_version(flexible), header, sink)
        encode_into(spec.request_class, api_version, request, sink)

    return _framed(body)


def decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[int, Any]:
    """Client side: parse a response frame body -> (correlation_id, response value)."""
    spec = API_SPECS.get(api_key)
    if spec is None or not spec.supports(api_version):
        raise ValueError(f"cannot decode api key {api_key} version {api_version}")
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    header_version = response_header_version(api_key, spec.is_flexible(api_version))
    header, pos = decode_message(ResponseHeader, header_version, buf, 0)
    if api_key == API_VERSIONS_KEY and api_version > 0:
        return header.correlation_id, _decode_api_versions_response(buf, pos, api_version)
    response, _ = decode_message(spec.response_class, api_version, buf, pos)
    return header.correlation_id, response


def _decode_api_versions_response(buf: memoryview, pos: int, api_version: int) -> Any:
    """A broker answers a too-new ApiVersions request with a v0 body (KIP-511), so an
    UNSUPPORTED_VERSION error, or a body that does not parse at our version, is read as v0."""
    error_code, _ = read_int16(buf, pos)
    if error_code == ErrorCode.UNSUPPORTED_VERSION:
        return decode_message(m.ApiVersionsResponse, 0, buf, pos)[0]
    try:
        return decode_message(m.ApiVersionsResponse, api_version, buf, pos)[0]
    except DecodeError:
        return decode_message(m.ApiVersionsResponse, 0, buf, pos)[0]
