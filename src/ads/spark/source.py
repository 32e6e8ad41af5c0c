"""The ``ads`` Spark data source: Spark's Kafka source and sink, over the wire protocol.

``spark.read.format("ads")``, ``spark.readStream.format("ads")``, ``df.write.format("ads")``
and ``df.writeStream.format("ads")`` take the options and columns of Spark's Kafka connector
(``format("kafka")`` itself cannot be claimed by a Python data source). The schema is
Spark's Kafka schema: ``key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int``, plus
``headers array<struct<key:string,value:binary>>`` with ``includeHeaders=true``.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ads.spark.options import (
    SourceOptionError,
    parse_sink_options,
    parse_source_options,
)
from ads.spark.reader import AdsBatchReader
from ads.spark.sink import (
    EXACTLY_ONCE_BATCH_ONLY,
    EXACTLY_ONCE_NEEDS_TOPIC,
    AdsBatchWriter,
    AdsStreamWriter,
    check_producer_config,
    check_sink_schema,
)
from ads.spark.stream import AdsStreamReader

__all__ = ["AdsDataSource", "kafka_schema"]

SHORT_NAME = "ads"


def kafka_schema(include_headers: bool = False) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


class AdsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def _include_headers(self) -> bool:
        raw = str(self.options.get("includeHeaders", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise SourceOptionError(f"Option 'includeHeaders' must be 'true' or 'false', got "
                                    f"{raw!r}")
        return raw == "true"

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        if schema != kafka_schema(self._include_headers()):
            raise SourceOptionError(
                "The ads source has a fixed schema and cannot be set with a custom one")

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options, streaming=False)
        self._check_schema(schema)
        return AdsBatchReader(options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        options = parse_source_options(self.options, streaming=True)
        self._check_schema(schema)
        return AdsStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_sink_options(self.options)
        if options.exactly_once:
            raise SourceOptionError(EXACTLY_ONCE_BATCH_ONLY)
        if overwrite:
            raise SourceOptionError(
                "Save mode Overwrite not allowed for the ads sink. Allowed save modes are "
                "Append and ErrorIfExists (default).")
        check_sink_schema(schema, options)
        check_producer_config(options)
        return AdsBatchWriter(options)

    def streamWriter(self, schema: StructType,  # noqa: N802 - PySpark's name
                     overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        if options.exactly_once and options.topic is None:
            raise SourceOptionError(EXACTLY_ONCE_NEEDS_TOPIC)
        check_sink_schema(schema, options)
        check_producer_config(options)
        return AdsStreamWriter(options)
