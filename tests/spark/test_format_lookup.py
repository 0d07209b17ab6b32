"""format("vdl") resolves from any working directory: Spark finds Python data sources by listing
top-level `pyspark_*` modules with pkgutil.iter_modules(), which sees a wheel install and a
compat-mode editable install (`make install`) but not setuptools' default import-hook editable
install. The check runs in a fresh interpreter outside the repository, without PYTHONPATH, so
only the installation can make the module visible."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

LOOKUP = textwrap.dedent("""
    import os, pkgutil, sys
    listed = sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_"))
    print("listed:", listed, flush=True)
    if "pyspark_vdl" not in listed:
        sys.exit(3)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").appName("vdl-format-lookup")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        spark.read.format("vdl").load()  # no bootstrap.servers: our own validation must answer
    except Exception as error:
        print("load:", type(error).__name__, error, flush=True)
    finally:
        spark.stop()
""")


def test_format_vdl_resolves_outside_the_repository(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", LOOKUP], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=150)
    assert done.returncode == 0, (
        "pyspark_vdl is not importable by name from outside the repository: install the project with "
        f"`make install` (pip install -e . --config-settings editable_mode=compat)\n{done.stdout}\n{done.stderr}")
    assert "listed: ['pyspark_vdl']" in done.stdout, done.stdout
    assert "option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required" in done.stdout, done.stdout
    assert "DATA_SOURCE_NOT_FOUND" not in done.stdout
