"""PySpark data source for ADS and any Kafka-protocol cluster, and the pipeline jobs.

``spark.read.format("ads")`` works without registration once the package is installed
(PySpark discovers the top-level ``pyspark_ads`` module); ``register(spark)`` is the
explicit alternative. Needs the ``spark`` extra (pyspark, pyarrow, numpy).

Importing this package also lets ``df.write.format("ads").save()`` run without an explicit
mode, as with Spark's Kafka sink (``ads.spark.savemode``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]

from ads.spark import savemode as _savemode

try:
    _savemode.install()
except ImportError:  # pragma: no cover - without the spark extra there is nothing to wrap
    pass


def register(spark: SparkSession) -> None:
    """Registers the ``ads`` format with ``spark``."""
    from ads.spark.source import AdsDataSource

    _savemode.install()
    spark.dataSource.register(AdsDataSource)
