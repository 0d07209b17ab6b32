"""format("vdl") resolves from any working directory: Spark finds Python data sources by listing
top-level `pyspark_*` modules with pkgutil.iter_modules(). With the src layout, a plain editable
install (`pip install -e '.[spark]'`, what `make install` does) puts src/ on sys.path through a .pth
file, and a wheel puts pyspark_vdl.py at the top of site-packages; both are listed. The check runs
in a fresh interpreter outside the repository, without PYTHONPATH, so only the installation can
make the module visible."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
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
        f"`make install` (pip install -e '.[dev]')\n{done.stdout}\n{done.stderr}")
    assert "listed: ['pyspark_vdl']" in done.stdout, done.stdout
    assert "option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required" in done.stdout, done.stdout
    assert "DATA_SOURCE_NOT_FOUND" not in done.stdout


def test_a_wheel_puts_the_lookup_module_and_every_package_at_the_top(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(repo)], check=True, timeout=150, capture_output=True)
    [wheel] = tmp_path.glob("vdl_for_spark-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
        entry_points = archive.read(next(n for n in archive.namelist() if n.endswith("entry_points.txt"))).decode()
    assert tops == {"pyspark_vdl.py", "vdl_wire", "vdl_broker", "vdl_client", "vdl_connector", "vdl_dev"}
    assert "[vdl.commands]\ndev = vdl_dev.cli" in entry_points


# What Spark's lookup and create-data-source workers do with format("vdl"): import the lookup
# module, make the source and ask its schema. A read's or a plain write's commit worker likewise
# only unpickles the writer. None of them talks to a broker, so none needs the client's modules,
# which load every protocol message class (about half a CPU second of each worker's start); none
# reads or writes a record, so none needs numpy, pyarrow or the connector's record code (the
# connector's import took 166 ms in such a worker with them, 15 ms without).
LIGHT_WORKER = textwrap.dedent("""
    import sys
    from pyspark_vdl import DefaultSource
    from vdl_connector.sink import end_transactions
    from vdl_connector.options import parse_sink_options
    source = DefaultSource({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "orders"})
    source.schema()
    end_transactions(parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9"}), [None], commit=True)
    heavy = sorted(m for m in sys.modules if m in ("vdl_wire.messages", "vdl_wire.api", "vdl_client.client",
                                                   "numpy", "pyarrow", "vdl_connector.reading",
                                                   "vdl_connector.producing"))
    print("loaded:", heavy)
    sys.exit(1 if heavy else 0)
""")


def test_planning_workers_load_neither_the_client_nor_arrow(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", LIGHT_WORKER], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
