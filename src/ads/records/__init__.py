"""RecordBatch v2 codec: layout, CRC32C, compression, validation and record decoding.

Sans-io: nothing here touches files, sockets or the event loop, and nothing imports other
``ads`` packages. ``batch`` is the entry point; ``compression``, ``record`` and ``crc`` are
its parts; ``errors`` maps failures to Kafka error codes.
"""
