"""What this node applies of each stream's config (cluster/stream_configs.py): the log's roll and
retention settings and the produce size limit, from the stream's values or the node's defaults.
Every replica applies them, at open and after every change committed to the metadata."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from vdl_broker.cluster.stream_configs import CONFIG_KEYS, StreamSettings, stream_settings
from vdl_broker.config import NodeConfig
from vdl_broker.log import LogConfig


def node_defaults(config: NodeConfig) -> dict[str, Any]:
    """The node settings that are stream defaults, by NodeConfig field name."""
    return {key.node_setting: getattr(config, key.node_setting)
            for key in CONFIG_KEYS.values() if key.node_setting is not None}


def settings_for(config: NodeConfig, stream_config: Mapping[str, Any]) -> StreamSettings:
    return stream_settings(stream_config, node_defaults(config))


def log_config_for(config: NodeConfig, settings: StreamSettings | None = None) -> LogConfig:
    """A stream log's settings: the node's, with the stream's own where it has them."""
    base = LogConfig(segment_bytes=config.segment_bytes, segment_ms=config.segment_ms,
                     retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
                     state_snapshot_bytes=config.producer_state_snapshot_bytes, fsync=config.fsync)
    return base if settings is None else with_settings(base, settings)


def with_settings(log_config: LogConfig, settings: StreamSettings) -> LogConfig:
    if not settings.retention_deletes:  # cleanup.policy=compact: every record is kept
        return replace(log_config, segment_bytes=settings.segment_bytes, segment_ms=settings.segment_ms,
                       retention_ms=-1, retention_bytes=-1)
    return replace(log_config, segment_bytes=settings.segment_bytes, segment_ms=settings.segment_ms,
                   retention_ms=settings.retention_ms, retention_bytes=settings.retention_bytes)
