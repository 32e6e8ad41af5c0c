"""PySpark's discovery hook: a top-level ``pyspark_*`` module with ``DefaultSource`` makes
``spark.read.format("ads")`` work without a registration call."""

from ads.spark.source import AdsDataSource as DefaultSource

__all__ = ["DefaultSource"]
