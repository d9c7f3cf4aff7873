"""One local SparkSession with Apache Hudi's Spark bundle for every Spark
test, and the `tributary` binary they drive. Without PySpark, the bundle or
Java, the tests fail under `CI` and are skipped elsewhere."""

import os
import shutil
import subprocess

import pytest

import env
from support import ROOT, tributary_bin


def _missing() -> list[str]:
    left = env.missing()
    if shutil.which("java") is None:
        left.append("java is not on the PATH")
    return left


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    left = _missing()
    if left:
        what = "; ".join(left) + " (python3 tests/spark/env.py install)"
        if os.environ.get("CI"):
            pytest.fail(f"under CI the Spark tests may not pass without Spark: {what}")
        pytest.skip(what)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tributary-interop")
        .config("spark.jars", ",".join(str(env.jar_path(c)) for c in env.JARS))
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def tributary_built():
    """Builds the `tributary` binary the tests run (a no-op when it is
    current), unless `TRIBUTARY_BIN` names one."""
    if "TRIBUTARY_BIN" not in os.environ:
        subprocess.run(["cargo", "build", "--quiet", "--bin", "tributary"], cwd=ROOT, check=True)
    assert tributary_bin().is_file(), f"{tributary_bin()} is missing"
