"""One local SparkSession for the whole Spark suite, plus helpers.

Skipped as a whole when pyspark is not installed (``pip install '.[spark]'``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator:
    # Python workers must run this interpreter and find the package.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, paths)])
    import disque_spark

    session = disque_spark.session(
        "local[2]",
        app_name="disque-spark-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
            "spark.python.worker.faulthandler.enabled": "true",
            "spark.sql.streaming.stopTimeout": "20s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
