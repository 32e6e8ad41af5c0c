"""A local SparkSession for tests: one per process, ``local[2]``, UI off, few shuffle
partitions, UTC, and executors on this interpreter (which has ads installed).

The ``ads`` format is not registered explicitly: tests go through PySpark's automatic
discovery of ``pyspark_ads``, as users do. ``jars`` go on the session's class path
(``spark.jars``), e.g. Spark's own Kafka connector beside ``ads``; the first call decides,
since a JVM's class path is fixed when it starts."""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session"]

_session: SparkSession | None = None


def local_session(jars: Sequence[str] = ()) -> SparkSession:
    global _session
    if _session is not None:
        return _session
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import ads.spark  # noqa: F401 - the default save mode for the ads sink

    builder = (SparkSession.builder.master("local[2]").appName("ads tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    atexit.register(spark.stop)
    _session = spark
    return spark
