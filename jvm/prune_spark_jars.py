"""Drop from jvm/lib/spark/ every jar whose artifact pyspark already ships (in pyspark/jars/).

Maven copies delta-spark's and spark-sql-kafka's whole runtime closure, Hadoop, Jackson, Scala and
Parquet included; Spark loads its own copies of those first, and a second, older copy on
spark.jars could shadow a class. What is left is what Spark lacks: the Kafka connector, the Kafka
client, Delta and their few own dependencies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyspark

# "spark-sql-kafka-0-10_2.13-4.2.0.jar" -> "spark-sql-kafka-0-10_2.13": the version starts at the
# first "-<digits>.<digit>".
VERSION = re.compile(r"-\d+\.\d.*\.jar$")


def artifact(jar: Path) -> str:
    return VERSION.sub("", jar.name)


def main(folder: Path) -> None:
    shipped = {artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in sorted(folder.glob("*.jar")):
        if artifact(jar) in shipped:
            jar.unlink()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
