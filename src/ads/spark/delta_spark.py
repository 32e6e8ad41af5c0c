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
itself, so a replayed batch adds nothing. ``MERGE`` (upsert) has no writer options: the
same pair goes in the session confs ``spark.databricks.delta.write.txnAppId`` and
``...txnVersion`` (Delta's idempotent DML), set for the one statement.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

__all__ = ["DELTA_BUILDS", "JARS_ENV", "DeltaPackageError", "delta_coordinates",
           "delta_session_conf", "has_delta", "spark_append", "spark_create", "spark_maintain",
           "spark_merge"]

# pyspark major.minor -> the Delta release with a build for it (on Maven Central).
DELTA_BUILDS = {"4.2": "4.4.0"}
JARS_ENV = "ADS_SPARK_JARS"
_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Delta's idempotent DML: a MERGE, UPDATE or DELETE run while both are set commits a ``txn``
# action, or nothing when the table already records that version (or a later one) for the
# app id. (Delta 4.4 resets the version after each write only with
# ``spark.databricks.delta.write.txnVersion.autoReset.enabled``, false by default: the job
# unsets both itself.)
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


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


def _append(frame: DataFrame, partition_by: list[str]) -> DataFrameWriter:
    writer = frame.write.format("delta").mode("append")
    return writer.partitionBy(*partition_by) if partition_by else writer


def spark_append(frame: DataFrame, path: Path, partition_by: list[str], app: str,
                 batch: int) -> None:
    """One Delta commit of ``frame``, skipped by Delta when the table already records
    ``batch`` (or a later one) for ``app``."""
    (_append(frame, partition_by).option("txnAppId", app).option("txnVersion", str(batch))
     .option("userMetadata", f"ads.batch={batch}").save(str(path.absolute())))


def spark_create(frame: DataFrame, path: Path, partition_by: list[str]) -> None:
    """The table created empty with ``frame``'s columns, as an append would create it;
    no ``txn`` action, since it holds no batch."""
    _append(frame.limit(0), partition_by).save(str(path.absolute()))


def spark_merge(frame: DataFrame, path: Path, key: str, tombstone: str, app: str,
                batch: int) -> None:
    """One ``MERGE`` of ``frame`` (one row per ``key``) into the table at ``path``: a key's
    row is deleted by a row whose ``tombstone`` column is true and replaced by any other;
    a new key's row is inserted unless it is a tombstone. The table's columns are taken
    from ``frame`` by name (``tombstone`` is not one of them). Skipped by Delta when the
    table already records ``batch`` (or a later one) for ``app``."""
    # The frame of a foreachBatch belongs to the stream's own session (a clone of the
    # job's): the view and the confs must be that session's to be seen by the statement.
    spark = frame.sparkSession
    view = "_ads_merge_source"
    frame.createOrReplaceTempView(view)
    confs = {_TXN_APP_ID: app, _TXN_VERSION: str(batch), _USER_METADATA: f"ads.batch={batch}"}
    for name, value in confs.items():
        spark.conf.set(name, value)
    try:
        spark.sql(f"MERGE INTO {_table(path)} AS t USING {view} AS s ON t.{key} = s.{key} "
                  f"WHEN MATCHED AND s.{tombstone} THEN DELETE "
                  "WHEN MATCHED THEN UPDATE SET * "
                  f"WHEN NOT MATCHED AND NOT s.{tombstone} THEN INSERT *").collect()
    finally:
        # Unset: the session's later writes would carry this batch's txn too, and one
        # on the same table be skipped as done.
        for name in confs:
            spark.conf.unset(name)
        spark.catalog.dropTempView(view)


def _table(path: Path) -> str:
    return "delta.`{}`".format(str(path.absolute()).replace("`", "``"))


def spark_maintain(spark: SparkSession, path: Path, retention_hours: float) -> str:
    """``OPTIMIZE`` (small files compacted), then ``VACUUM`` of the files no version
    younger than the retention needs; the ``txn`` records survive both."""
    table = _table(path)
    metrics = spark.sql(f"OPTIMIZE {table}").collect()[0]["metrics"]
    # Delta refuses a retention under its default week unless told the reader risk is
    # taken, as --retention-hours says.
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"VACUUM {table} RETAIN {int(retention_hours)} HOURS").collect()
    return (f"{metrics['numFilesRemoved']} files compacted into {metrics['numFilesAdded']}, "
            f"vacuumed (retention {int(retention_hours)} h)")
