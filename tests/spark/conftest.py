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
    session = env.session("tributary-interop", "2g", tmp_path_factory.mktemp("spark-warehouse"))
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def tributary_built():
    """Builds the `tributary` binary the tests run (a no-op when it is
    current), unless `TRIBUTARY_BIN` names one."""
    if "TRIBUTARY_BIN" not in os.environ:
        subprocess.run(["cargo", "build", "--quiet", "--bin", "tributary"], cwd=ROOT, check=True)
    assert tributary_bin().is_file(), f"{tributary_bin()} is missing"
