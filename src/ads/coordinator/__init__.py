"""Coordinators: the group coordinator (`group/`) and, next, the transaction coordinator.

What every coordinator shares is here: the runtime that loads, serves and unloads the
partitions of an internal topic this broker leads and writes their records (`runtime.py`),
the per-partition timers (`timer.py`), and the narrow view a coordinator has of the broker
(`topic.py`: `InternalTopic`, `TopicMetadata`, `AppendError`). Coordinators import only
`common`, `storage`, `records` and `protocol`, never the broker.
"""
