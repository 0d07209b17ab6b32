"""`vdl demo` argument handling and data-directory preparation (no cluster, no Spark)."""

from __future__ import annotations

import argparse
from pathlib import Path

from vdl_dev.run import _prepare, add_demo_parser, main


def test_invalid_counts_are_refused(capsys) -> None:  # noqa: ANN001
    assert main(["--records", "0"]) == 2
    assert "--records and --nodes must be >= 1" in capsys.readouterr().err


def test_the_vdl_cli_can_mount_the_demo_parser() -> None:
    parser = argparse.ArgumentParser(prog="vdl")
    add_demo_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["demo", "--records", "5", "--nodes", "1", "--data-dir", "/x"])
    assert (args.records, args.nodes, args.data_dir, callable(args.run)) == (5, 1, Path("/x"), True)


def test_a_reused_data_dir_loses_only_the_previous_demo_run(tmp_path: Path) -> None:
    (tmp_path / "delta" / "t").mkdir(parents=True)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "cluster.json").write_text("{}")
    (tmp_path / "mine.txt").write_text("keep me")
    base, temporary = _prepare(tmp_path)
    assert (base, temporary) == (tmp_path, False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
