"""Stream and group configs through a VdlClient: DescribeConfigs (key 32) and
IncrementalAlterConfigs (key 44) for TOPIC and GROUP resources, as Kafka's AdminClient sends them.

Describe goes to the stream's leader: every node answers a stream's configs from the replicated
metadata, and the leader also knows the state of the stream's Delta table (read-only
`vdl.table.status.*` entries); a group's, to any node. Alter goes to the metadata leader (any
node would forward it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vdl_client.client import VdlClient
from vdl_client.routes import ANY_NODE, CONTROLLER, LeaderOf, Route
from vdl_client.settings import StreamNotFoundError, VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

TOPIC_RESOURCE, GROUP_RESOURCE = 2, 32  # Kafka's ConfigResource.Type
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
# DescribeConfigs ConfigSource, as the CLI says it
SOURCES = {1: "stream", 3: "cluster", 4: "node", 5: "default", 8: "group"}


@dataclass(frozen=True)
class DescribedConfig:
    """A stream's or a group's config as described."""

    name: str
    value: str | None
    # "stream" or "group" (set for it), "node" (node.toml), "default", "cluster" (min.insync.replicas)
    source: str
    read_only: bool


def describe_stream_configs(client: VdlClient, stream: str, keys: Sequence[str] | None = None) -> list[DescribedConfig]:
    """A stream's configs, in the broker's order (every key with its effective value)."""
    return _describe(client, LeaderOf(stream), TOPIC_RESOURCE, stream, keys)


def describe_group_configs(client: VdlClient, group: str) -> list[DescribedConfig]:
    """A consumer group's configs: its own, else the nodes' settings (whether or not it exists)."""
    return _describe(client, ANY_NODE, GROUP_RESOURCE, group, None)


def _describe(client: VdlClient, route: Route, resource_type: int, name: str,
              keys: Sequence[str] | None) -> list[DescribedConfig]:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None if keys is None else list(keys))])

    what = f"DescribeConfigs {name!r}"
    result = client.call(route, request, what, error_of=lambda r: r.results[0].error_code).results[0]
    _raise_for(result.error_code, result.error_message, what)
    return [DescribedConfig(c.name, c.value, SOURCES.get(c.config_source, str(c.config_source)), c.read_only)
            for c in result.configs]


def stream_config_values(client: VdlClient, streams: Sequence[str], keys: Sequence[str]) -> dict[str, dict[str, str]]:
    """The non-empty values of `keys` (set, or a default) for each of `streams`, in one request
    to any node (each answers from the replicated metadata); a missing stream is absent. A key
    without a default is described "" while unset."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=stream, configuration_keys=list(keys)) for stream in streams])

    if not streams:
        return {}
    response = client.call(ANY_NODE, request, "DescribeConfigs")
    return {result.resource_name: {c.name: c.value for c in result.configs if c.value}
            for result in response.results if result.error_code == 0}


def alter_stream_configs(client: VdlClient, stream: str, to_set: Mapping[str, str] | None = None,
                         to_delete: Sequence[str] = ()) -> None:
    """Set and remove (back to the default) configs of one stream; INVALID_CONFIG raises
    VdlClientError with the broker's message naming the key."""
    _alter(client, TOPIC_RESOURCE, stream, to_set or {}, to_delete)


def alter_group_configs(client: VdlClient, group: str, to_set: Mapping[str, str] | None = None,
                        to_delete: Sequence[str] = ()) -> None:
    """Set and remove (back to the nodes' settings) a consumer group's own configs."""
    _alter(client, GROUP_RESOURCE, group, to_set or {}, to_delete)


def _alter(client: VdlClient, resource_type: int, name: str, to_set: Mapping[str, str],
           to_delete: Sequence[str]) -> None:
    alterable = IncrementalAlterConfigsRequest.AlterableConfig
    configs = [alterable(name=k, config_operation=SET, value=v) for k, v in to_set.items()]
    configs += [alterable(name=k, config_operation=DELETE, value=None) for k in to_delete]
    request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=configs)])

    what = f"IncrementalAlterConfigs {name!r}"
    response = client.call(CONTROLLER, request, what, error_of=lambda r: r.responses[0].error_code)
    result = response.responses[0]
    _raise_for(result.error_code, result.error_message, what)


def _raise_for(error_code: int, message: str | None, what: str) -> None:
    if error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise StreamNotFoundError(f"{what}: stream does not exist")
    if error_code in (ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST):
        raise VdlClientError(f"{ErrorCode(error_code).name}: {message}")
    VdlClient.check_error(error_code, f"{what} ({message})" if message else what)
