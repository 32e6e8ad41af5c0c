"""The default save mode for ``df.write.format("ads").save()``.

Spark's Kafka sink accepts its default save mode (ErrorIfExists) and appends, since a topic
is never "overwritten". PySpark refuses every mode but Append and Overwrite for Python data
sources, in the JVM, before the sink is reached. ``install`` wraps PySpark's
``DataFrameWriter`` (in this driver process) so that a write to the ``ads`` format with no
explicit mode is an append; an explicit mode is passed through untouched.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_MARK = "_ads_default_append"


def install() -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, _MARK, False):
        return
    original_mode = DataFrameWriter.mode
    original_format = DataFrameWriter.format
    original_save = DataFrameWriter.save

    def mode(self: Any, saveMode: str | None) -> Any:  # noqa: N803 - PySpark's name
        if saveMode is not None:
            self._ads_mode = saveMode
        return original_mode(self, saveMode)

    def format(self: Any, source: str) -> Any:  # noqa: A001 - PySpark's name
        self._ads_format = source
        return original_format(self, source)

    def save(self: Any, path: str | None = None, format: str | None = None,  # noqa: A002
             mode: str | None = None, partitionBy: Any = None,  # noqa: N803
             **options: Any) -> None:
        target = format or getattr(self, "_ads_format", None)
        if (mode is None and getattr(self, "_ads_mode", None) is None
                and str(target).lower() == "ads"):
            mode = "append"
        original_save(self, path, format, mode, partitionBy, **options)

    # Patching the writer's methods is the point here; mypy forbids assigning to methods.
    DataFrameWriter.mode = mode  # type: ignore[method-assign]  # patched on purpose
    DataFrameWriter.format = format  # type: ignore[method-assign]  # patched on purpose
    DataFrameWriter.save = save  # type: ignore[method-assign]  # patched on purpose
    setattr(DataFrameWriter, _MARK, True)
