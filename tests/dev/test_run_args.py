"""`vdl demo` argument handling and data-directory preparation (no cluster, no Spark)."""

from __future__ import annotations

from pathlib import Path

from vdl_client.cli import main as cli_main
from vdl_dev.run import _prepare, main


def test_invalid_counts_are_refused(capsys) -> None:  # noqa: ANN001
    assert main(["--records", "0"]) == 2
    assert "--records and --nodes must be >= 1" in capsys.readouterr().err


def test_the_vdl_cli_hands_demo_arguments_to_vdl_dev(capsys) -> None:  # noqa: ANN001
    assert cli_main(["demo", "--records", "0"]) == 2
    assert "--records and --nodes must be >= 1" in capsys.readouterr().err


def test_a_reused_data_dir_loses_only_the_previous_demo_run(tmp_path: Path) -> None:
    (tmp_path / "delta" / "t").mkdir(parents=True)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "cluster.json").write_text("{}")
    (tmp_path / "mine.txt").write_text("keep me")
    base, temporary = _prepare(tmp_path)
    assert (base, temporary) == (tmp_path, False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
