"""Per-partition logs on the local file system (Kafka's log layer).

- ``manager.LogManager``: every partition directory under ``log.dirs``; startup, recovery,
  offset checkpoints, retention, flush scheduling, clean shutdown.
- ``log.Log``: one partition: append (offsets, idempotent producers, rolls), reads as file
  regions for ``sendfile``, ListOffsets, DeleteRecords, truncation, leader epochs.
- ``segment.LogSegment``: a ``.log`` file and its indexes; ``files``: segment file names and
  suffixes, and ``FileRegion``, what fetches send.
- ``index``, ``producer_state``, ``epoch_cache``, ``checkpoint``: the on-disk formats, each
  documented byte by byte with its crash-recovery rule.
- ``config.LogConfig``, ``clock``, ``errors``.

Imports only ``ads.records``.
"""
