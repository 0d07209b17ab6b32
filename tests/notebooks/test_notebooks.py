"""The notebooks/ run top to bottom, unchanged, against a local dev cluster.

Each Databricks source file is converted to a Jupyter notebook (convert.py), a first cell with
local stand-ins for `spark`, `display` and `dbutils.widgets` is prepended, and nbclient executes it
in one python3 kernel shared by the three notebooks (one Spark JVM for all). The notebooks assert
their own results; the test also checks their printed outputs. 03 kills a node, so it runs last.

The notebooks run with fewer events than their defaults for users (their widgets), enough for each
to go through every step it shows: 02 runs two micro-batches (the first creates the Delta table,
the second MERGEs into it) and follows for a few micro-batches; 03 streams in micro-batches of
1,000, stops its query in the first half and resumes with the rest after the leader's kill.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from tests.notebooks.convert import convert, convert_file, shim_source
from tests.support.cluster import start_cluster
from vdl_dev.cluster import DemoCluster

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT_S = 300
# 02: two micro-batches of 5,000 (its maxOffsetsPerTrigger is max(5000, records // 4)).
RECORDS_02 = 10_000
# 03: micro-batches of 1,000 (max(1000, records // 10)): the query stops after one or two of the
# first half's, the restart reads the rest after the leader's kill.
RECORDS_03 = 4_000


@pytest.fixture(scope="module")
def notebook_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoCluster]:
    directory = tmp_path_factory.mktemp("notebook-cluster")
    cluster = DemoCluster(3, start_cluster(directory, nodes=3), directory)  # the notebooks' view of it
    cluster.write_state()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    """One started kernel manager; each notebook gets its own client on it."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(REPO))
    yield manager
    manager.shutdown_kernel(now=True)


def _execute(name: str, kernel: Any, widgets: dict[str, str]) -> nbformat.NotebookNode:
    notebook = convert_file(NOTEBOOKS / name)
    notebook.cells.insert(0, new_code_cell(shim_source(widgets)))
    client = NotebookClient(notebook, km=kernel, timeout=CELL_TIMEOUT_S, allow_errors=False)
    client.execute()
    return notebook


def _text(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def _has_image(notebook: nbformat.NotebookNode) -> bool:
    return any("image/png" in o.get("data", {}) for c in notebook.cells for o in c.get("outputs", []))


def test_converter_maps_cells_and_magics() -> None:
    source = ("# Databricks notebook source\n# MAGIC %md\n# MAGIC # Title\n# MAGIC\n# MAGIC text\n\n"
              "# COMMAND ----------\n\nx = 1\n\n# COMMAND ----------\n\n# MAGIC %pip install foo\n\n"
              "# COMMAND ----------\n# MAGIC %python\n# MAGIC y = 2\n")
    notebook = convert(source)
    assert [c.cell_type for c in notebook.cells] == ["markdown", "code", "code", "code"]
    assert notebook.cells[0].source == "# Title\n\ntext"
    assert notebook.cells[1].source == "x = 1"
    assert "skipped locally" in notebook.cells[2].source
    assert notebook.cells[3].source == "y = 2"
    nbformat.validate(notebook)
    with pytest.raises(ValueError, match="first line"):
        convert("x = 1\n")
    with pytest.raises(ValueError, match="unsupported magic"):
        convert("# Databricks notebook source\n# MAGIC %scala\n# MAGIC val x = 1\n")


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.py")), ids=lambda p: p.name)
def test_every_notebook_is_valid_databricks_source(path: Path) -> None:
    notebook = convert_file(path)
    nbformat.validate(notebook)
    assert notebook.cells[0].cell_type == "markdown"
    assert any("dbutils.widgets.text(\"bootstrap_servers\"" in c.source for c in notebook.cells)


@pytest.mark.timeout(400)
def test_01_quickstart(notebook_cluster: DemoCluster, kernel: Any) -> None:
    notebook = _execute("01_quickstart.py", kernel, {"bootstrap_servers": notebook_cluster.bootstrap_servers})
    text = _text(notebook)
    assert "batch read: 1100 records, offsets 0..1099" in text
    assert "quickstart OK: 1100 records read in batch, 1100 streamed in 3 micro-batches" in text


@pytest.mark.timeout(500)
def test_02_streaming_to_delta(notebook_cluster: DemoCluster, kernel: Any, tmp_path: Path) -> None:
    notebook = _execute("02_streaming_to_delta.py", kernel, {
        "bootstrap_servers": notebook_cluster.bootstrap_servers, "records": str(RECORDS_02), "output_dir": str(tmp_path),
        "follow_rate": "1000", "follow_seconds": "4"})
    text = _text(notebook)
    assert "2 micro-batches" in text and "Delta commits for batches [0, 1]" in text, text
    assert "replaying it skipped: True" in text
    assert f"rows match the expected aggregates: True; {RECORDS_02} enriched events" in text
    assert _has_image(notebook), "the aggregates plot is missing"
    assert re.search(r"^batch \d+: [\d,]+ events in \d+\.\d\d s \(enriched write \d+\.\d\d s, window aggregates "
                     r"\d+\.\d\d s, Delta MERGE \d+\.\d\d s\), \d+ windows merged; freshness \d+\.\d\d s",
                     text, re.MULTILINE), text
    assert re.search(r"freshness check: (\d+) produced, \1 counted in Delta, \1 enriched: True", text), text


@pytest.mark.timeout(500)
def test_03_recovery(notebook_cluster: DemoCluster, kernel: Any, tmp_path: Path) -> None:
    state = notebook_cluster.data_dir / "cluster.json"
    notebook = _execute("03_recovery.py", kernel, {
        "bootstrap_servers": notebook_cluster.bootstrap_servers, "cluster_state": str(state),
        "records": str(RECORDS_03), "output_dir": str(tmp_path)})
    text = _text(notebook)
    assert f"recovery OK: {RECORDS_03} rows, {RECORDS_03} distinct offsets 0..{RECORDS_03 - 1}" in text
    stopped_after = int(re.search(r"stopped the query after (\d+) records", text)[1])  # type: ignore[index]
    assert 0 < stopped_after <= RECORDS_03 // 2, text  # stopped in the first half: the restart resumes
    assert "identical to the produced events: True" in text
    if json.loads(state.read_text())["kind"].startswith("3-node"):
        assert "killed node" in text and "leader: node" in text
