"""What the Spark interoperability tests and benchmarks run on: the versions
of PySpark, Apache Hudi's Spark bundle and Spark's Kafka source, and how a
session starts, in one place; `python3 tests/spark/env.py install` installs
them (PySpark from PyPI, the jars from Maven Central through Maven's local
repository)."""

import os
import subprocess
import sys
from pathlib import Path

#: PySpark from PyPI; Hudi's Spark 3.5 bundle is built for Spark 3.5.
PYSPARK = "3.5.7"
#: The newest Hudi 1.x that writes table version 8 (it defaults to 9, so
#: every Spark write pins `hoodie.write.table.version=8`).
HUDI = "1.2.0"

JARS = [f"org.apache.hudi:hudi-spark3.5-bundle_2.12:{HUDI}"]
#: Spark's Kafka source (for Structured Streaming, at Spark's version) and
#: the jars it needs that PySpark does not ship: its compile dependencies,
#: at the versions its pom names (kafka-clients' own are in PySpark).
KAFKA_JARS = [
    f"org.apache.spark:spark-sql-kafka-0-10_2.12:{PYSPARK}",
    f"org.apache.spark:spark-token-provider-kafka-0-10_2.12:{PYSPARK}",
    "org.apache.kafka:kafka-clients:3.4.1",
    "org.apache.commons:commons-pool2:2.11.1",
]


def maven_repository() -> Path:
    return Path(os.environ.get("MAVEN_REPOSITORY", Path.home() / ".m2" / "repository"))


def jar_path(coordinate: str) -> Path:
    group, artifact, version = coordinate.split(":")
    return maven_repository() / group.replace(".", "/") / artifact / version / f"{artifact}-{version}.jar"


def jars(kafka: bool) -> list[str]:
    """The coordinates of a session's jars: Hudi's, and with `kafka` the
    Kafka source's."""
    return JARS + KAFKA_JARS if kafka else JARS


def missing(kafka: bool = False) -> list[str]:
    """What is not installed, as readable lines (empty when all is); with
    `kafka`, the Kafka source's jars too."""
    out = []
    try:
        import pyspark

        if pyspark.__version__ != PYSPARK:
            out.append(f"pyspark {pyspark.__version__} is installed, the tests need {PYSPARK}")
    except ImportError:
        out.append(f"pyspark {PYSPARK} is not installed")
    out += [f"{c} is not in {maven_repository()}" for c in jars(kafka) if not jar_path(c).is_file()]
    return out


def session(app: str, driver_memory: str, warehouse: Path, kafka: bool = False):
    """A local[2] SparkSession with Hudi's Spark bundle, its SQL extension
    and catalog, Spark's catalog tables under `warehouse`; with `kafka`,
    Spark's Kafka source too."""
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.jars", ",".join(str(jar_path(c)) for c in jars(kafka)))
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", driver_memory)
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    return s


def install() -> None:
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(pip + [f"pyspark=={PYSPARK}", "pytest"], check=True)
    for c in jars(kafka=True):
        if not jar_path(c).is_file():
            subprocess.run(["mvn", "--batch-mode", "--quiet", "dependency:get", f"-Dartifact={c}", "-Dtransitive=false"], check=True)
    left = missing(kafka=True)
    if left:
        sys.exit("\n".join(left))


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install()
    else:
        sys.exit("usage: env.py install")
