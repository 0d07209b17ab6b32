"""The demo's SparkSession (vdl_dev/session.py): what its Python processes import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from pathlib import Path
from vdl_dev.session import create_spark_session
spark = create_spark_session(Path(sys.argv[1]))
try:
    where = spark.sparkContext.parallelize([0], 1).map(
        lambda _: (__import__("pyspark").__file__, __import__("py4j").__file__)).collect()
    print("WORKER", *where[0])
finally:
    spark.stop()
"""


@pytest.mark.timeout(240)
def test_spark_workers_import_pyspark_from_site_packages_not_the_zip(tmp_path: Path) -> None:
    """Spark puts SPARK_HOME/python/lib/pyspark.zip first on its Python workers' path; a
    pip-installed pyspark's zip holds sources only, compiled anew in every worker. The demo's
    session hands the JVM a SPARK_HOME without python/, so workers import the installed package."""
    import py4j
    import pyspark

    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=200)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("WORKER ")]
    assert lines == [["WORKER", pyspark.__file__, py4j.__file__]], done.stdout + done.stderr
