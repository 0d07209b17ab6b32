"""Databricks notebook source (.py) -> Jupyter notebook (nbformat v4), for local execution.

Databricks' source format: the first line is `# Databricks notebook source`, cells are separated
by `# COMMAND ----------` lines, and a cell whose lines all start with `# MAGIC` runs a magic:
`%md` (markdown), `%python` (code); `%pip`/`%sh` install or shell cells cannot run locally and
become code cells that only print what was skipped. Anything else is an error, so a notebook
never silently loses a cell. `# DBTITLE` lines stay as comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
SKIPPED_MAGICS = ("%pip", "%sh")


class NotebookFormatError(ValueError):
    """The file is not a Databricks source notebook, or uses a magic we cannot run."""


def _cells(source: str) -> list[str]:
    lines = source.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise NotebookFormatError(f"the first line must be {HEADER!r}")
    cells, current = [], []
    for line in lines[1:]:
        if line.strip() == SEPARATOR:
            cells.append("\n".join(current).strip("\n"))
            current = []
        else:
            current.append(line)
    cells.append("\n".join(current).strip("\n"))
    return [c for c in cells if c.strip()]


def _unmagic(cell: str) -> list[str] | None:
    """The cell's lines without `# MAGIC ` when every line is a magic line, else None."""
    lines = cell.splitlines()
    if not all(line.startswith(MAGIC) for line in lines):
        return None
    return [line[len(MAGIC) + 1:] if line.startswith(MAGIC + " ") else line[len(MAGIC):] for line in lines]


def convert(source: str) -> nbformat.NotebookNode:
    notebook = new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for cell in _cells(source):
        lines = _unmagic(cell)
        if lines is None:
            notebook.cells.append(new_code_cell(cell))
            continue
        magic, _, first_rest = lines[0].strip().partition(" ")
        body = "\n".join(([first_rest] if first_rest else []) + lines[1:]).strip("\n")
        if magic == "%md":
            notebook.cells.append(new_markdown_cell(body))
        elif magic == "%python":
            notebook.cells.append(new_code_cell(body))
        elif magic in SKIPPED_MAGICS:
            notebook.cells.append(new_code_cell(f"print({('skipped locally: ' + lines[0].strip())!r})"))
        else:
            raise NotebookFormatError(f"unsupported magic {magic!r} in cell:\n{cell}")
    return notebook


def convert_file(path: Path) -> nbformat.NotebookNode:
    return convert(Path(path).read_text())


def shim_source(widgets: dict[str, str]) -> str:
    """The first cell run locally: what Databricks provides (spark, display, dbutils.widgets)."""
    return f'''# Local stand-ins for Databricks' spark, display and dbutils.widgets (injected by the test).
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
from types import SimpleNamespace
from pyspark.sql import DataFrame as _DataFrame, SparkSession
import IPython.display

from vdl_dev.jvm import spark_session_conf
from vdl_dev.session import environment, spark_jvm_options, spark_launch_environment

# As on Databricks: Delta (delta-spark, its SQL extension and catalog) in the session; the JVM
# starts as the test session's does (C1 only: less CPU for short runs; the class archive).
_builder = (SparkSession.builder.master("local[2]").appName("vdl-notebooks")
            .config("spark.driver.extraJavaOptions", " ".join(spark_jvm_options()))
            .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC"))
for _key, _value in spark_session_conf().items():
    _builder = _builder.config(_key, _value)
with environment(spark_launch_environment()):
    spark = _builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")


class _Widgets:
    def __init__(self, preset):
        self._preset, self._values = dict(preset), {{}}

    def text(self, name, default_value="", label=None):
        self._values[name] = self._preset.get(name, default_value)

    def get(self, name):
        return self._values[name]

    def removeAll(self):
        self._values.clear()


dbutils = SimpleNamespace(widgets=_Widgets({json.dumps(widgets)}))


def display(obj, *args, **kwargs):
    if isinstance(obj, _DataFrame):
        obj = obj.limit(1000).toPandas()
    IPython.display.display(obj)
'''
