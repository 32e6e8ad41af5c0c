"""What every layer needs and nothing of ADS: the injectable clock, the `TopicPartition` key,
crash-safe file helpers, the Java `.properties` parser.

This package imports nothing else of ``ads``; every other layer may import it.
"""
