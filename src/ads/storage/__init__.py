"""Per-partition logs on the local file system (Kafka's log layer).

- ``manager.LogManager``: every partition directory under ``log.dirs``; startup, recovery,
  offset checkpoints, retention, flush scheduling, clean shutdown.
- ``log.Log``: one partition: append (offsets, idempotent producers, roll decisions), leader
  epochs, high watermark, log start offset, ListOffsets, DeleteRecords, retention, truncation.
- ``local_log.LocalLog``: its segment list: load, roll, reads across segments as file regions
  for ``sendfile``, tail truncation, deletion of old segments, the cleaner's swap.
- ``segment.LogSegment``: a ``.log`` file and its indexes, appends and reads;
  ``files``: segment file names and suffixes, and ``FileRegion``, what fetches send.
- ``fileio``: the file layer segments and indexes write through (``FaultyFileIO`` for tests).
- ``index``, ``producer_state``, ``epoch_cache``, ``checkpoint``: the on-disk formats, each
  documented byte by byte with its crash-recovery rule.
- ``config.LogConfig``, ``clock``, ``errors``.

Imports only ``ads.records``.
"""
