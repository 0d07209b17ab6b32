"""Broker configuration: TOML file plus flags, flags win; bad values give one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdl_broker.server.config import ConfigError, load_config


def test_flags_only() -> None:
    config = load_config(["--data-dir", "/tmp/x", "--listen", "127.0.0.1:9999", "--auto-create-streams"])
    assert config.data_dir == Path("/tmp/x") and (config.host, config.port) == ("127.0.0.1", 9999)
    assert config.auto_create_streams is True and config.node_id == 1


def test_toml_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "vdl.toml"
    path.write_text('data_dir = "/data"\nlisten = "0.0.0.0:9092"\nsegment_bytes = 4096\nmax_request_bytes = 2048\n')
    config = load_config(["--config", str(path), "--max-request-bytes", "4096"])
    assert config.data_dir == Path("/data") and config.host == "0.0.0.0" and config.client_host == "127.0.0.1"
    assert config.segment_bytes == 4096 and config.max_request_bytes == 4096


@pytest.mark.parametrize("content, words", [
    ("data_dir = '/d'\nlisten = 'nope'\n", "listen"),
    ("data_dir = '/d'\nsegment_bytes = 'big'\n", "segment_bytes must be an integer"),
    ("data_dir = '/d'\nmystery = 1\n", "unknown setting"),
    ("listen = '127.0.0.1:1'\n", "data_dir is required"),
])
def test_errors_name_the_setting(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "vdl.toml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=words):
        load_config(["--config", str(path)])
