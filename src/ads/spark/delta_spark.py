"""Spark's own Delta Lake package (``delta-spark``) for ``ads pipeline table --writer
spark``: which build matches the installed pyspark, how the session gets it, and the
table operations the job runs through it.

The package is a JVM jar per Spark line, ``io.delta:delta-spark_<spark major.minor>_2.13``;
a build runs only on the Spark line it names (Delta 4.4.0 built for 4.2 fails on Spark 4.3
with ``NoSuchMethodError``), so the coordinates follow pyspark's major.minor through
``DELTA_BUILDS``, the one place that names them. The session gets the jars one of two ways:

- from a folder (``--spark-jars DIR`` or ``$ADS_SPARK_JARS``) holding the build and what it
  needs beside pyspark's jars, as ``make install`` copies them from
  ``tools/spark_delta/pom.xml`` into ``tools/spark_delta/target/jars``: ``spark.jars``,
  no repository needed at run time;
- otherwise by coordinates, ``spark.jars.packages``: Spark resolves them with Ivy from
  Maven Central (or the local Maven repository) when the session starts.

Either way the session also needs Delta's SQL extension (``MERGE``, ``OPTIMIZE``,
``VACUUM``) and catalog.

Exactly once: a micro-batch is written with the writer options ``txnAppId`` (the job's
query id) and ``txnVersion`` (the batch id), which Delta records in the commit as a
``txn`` action; a write whose version is not above the recorded one is skipped by Delta
itself, so a replayed batch adds nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DELTA_BUILDS", "JARS_ENV", "DeltaPackageError", "delta_coordinates",
           "delta_session_conf", "has_delta", "spark_append", "spark_maintain"]

# pyspark major.minor -> the Delta release with a build for it (on Maven Central).
DELTA_BUILDS = {"4.2": "4.4.0"}
JARS_ENV = "ADS_SPARK_JARS"
_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


class DeltaPackageError(RuntimeError):
    """No Delta build for the installed pyspark, or the jar folder lacks it."""


def delta_coordinates(pyspark_version: str) -> tuple[str, str, str]:
    """(group, artifact, version) of the Delta build for this pyspark version."""
    line = ".".join(pyspark_version.split(".")[:2])
    version = DELTA_BUILDS.get(line)
    if version is None:
        known = ", ".join(sorted(DELTA_BUILDS))
        raise DeltaPackageError(
            f"no build of Spark's Delta package is known for pyspark {pyspark_version} "
            f"(known: pyspark {known}); use --writer python")
    return "io.delta", f"delta-spark_{line}_2.13", version


def delta_session_conf(pyspark_version: str, jars: Path | None) -> dict[str, str]:
    """The session configuration that loads Delta: ``spark.jars`` from ``jars`` (or
    ``$ADS_SPARK_JARS``) when given, else ``spark.jars.packages``."""
    group, artifact, version = delta_coordinates(pyspark_version)
    if jars is None and os.environ.get(JARS_ENV):
        jars = Path(os.environ[JARS_ENV])
    conf = {"spark.sql.extensions": _EXTENSION,
            "spark.sql.catalog.spark_catalog": _CATALOG}
    if jars is None:
        conf["spark.jars.packages"] = f"{group}:{artifact}:{version}"
        return conf
    if not (jars / f"{artifact}-{version}.jar").is_file():
        raise DeltaPackageError(
            f"{jars} has no {artifact}-{version}.jar (make install copies it there from "
            "tools/spark_delta/pom.xml); without a jar folder Spark fetches "
            f"{group}:{artifact}:{version} itself")
    conf["spark.jars"] = ",".join(str(p.absolute()) for p in sorted(jars.glob("*.jar")))
    return conf


def has_delta(spark: SparkSession) -> bool:
    return _EXTENSION in (spark.conf.get("spark.sql.extensions", "") or "")


def spark_append(frame: DataFrame, path: Path, partition_by: list[str], app: str,
                 batch: int) -> None:
    """One Delta commit of ``frame``, skipped by Delta when the table already records
    ``batch`` (or a later one) for ``app``."""
    writer = (frame.write.format("delta").mode("append")
              .option("txnAppId", app).option("txnVersion", str(batch))
              .option("userMetadata", f"ads.batch={batch}"))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(path.absolute()))


def spark_maintain(spark: SparkSession, path: Path, retention_hours: float) -> str:
    """``OPTIMIZE`` (small files compacted), then ``VACUUM`` of the files no version
    younger than the retention needs; the ``txn`` records survive both."""
    table = f"delta.`{path.absolute()}`"
    metrics = spark.sql(f"OPTIMIZE {table}").collect()[0]["metrics"]
    # Delta refuses a retention under its default week unless told the reader risk is
    # taken, as --retention-hours says.
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"VACUUM {table} RETAIN {int(retention_hours)} HOURS").collect()
    return (f"{metrics['numFilesRemoved']} files compacted into {metrics['numFilesAdded']}, "
            f"vacuumed (retention {int(retention_hours)} h)")
