"""`vdl demo` argument handling and data-directory preparation (no cluster, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdl_client.cli import main as cli_main
from vdl_dev.run import _prepare, default_batch_records, main


def test_invalid_counts_are_refused(capsys) -> None:  # noqa: ANN001
    assert main(["--records", "0"]) == 2
    assert "--records and --nodes must be >= 1" in capsys.readouterr().err


def test_the_vdl_cli_hands_demo_arguments_to_vdl_dev(capsys) -> None:  # noqa: ANN001
    assert cli_main(["demo", "--records", "0"]) == 2
    assert "--records and --nodes must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize(("records", "batch"), [(1_000_000, 500_000), (100_000, 50_000), (30_001, 15_001),
                                              (10_000_000, 500_000), (5, 10_000)])
def test_the_demo_job_takes_half_the_records_per_micro_batch_at_most_500000(records: int, batch: int) -> None:
    assert default_batch_records(records) == batch


def test_a_reused_data_dir_loses_only_the_previous_demo_run(tmp_path: Path) -> None:
    (tmp_path / "delta" / "t").mkdir(parents=True)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "cluster.json").write_text("{}")
    (tmp_path / "mine.txt").write_text("keep me")
    base, temporary = _prepare(tmp_path)
    assert (base, temporary) == (tmp_path, False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_an_interrupt_inside_a_class_creation_counts_as_ctrl_c(tmp_path: Path,
                                                               monkeypatch) -> None:  # noqa: ANN001
    """Ctrl-C while an import creates a class whose descriptor has `__set_name__` (a dataclass
    field): Python raises a RuntimeError caused by the KeyboardInterrupt. The demo exits 130."""
    import vdl_dev.run as run

    class Interrupting:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    def import_interrupted(*args: object, **kwargs: object) -> None:
        type("Imported", (), {"field": Interrupting()})

    monkeypatch.setattr(run, "create_spark_session", lambda base: None)
    monkeypatch.setattr(run, "start_cluster", import_interrupted)
    monkeypatch.setattr(run, "shutdown", lambda *args: None)
    said: list[str] = []
    assert run.run_demo(records=1, data_dir=tmp_path, progress=False, say=said.append) == 130
    assert said[-1] == "\ninterrupted: everything stopped"

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a real failure")

    monkeypatch.setattr(run, "start_cluster", failing)
    with pytest.raises(RuntimeError, match="a real failure"):
        run.run_demo(records=1, data_dir=tmp_path, progress=False, say=said.append)
