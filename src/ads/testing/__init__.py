"""Test helpers: an in-process ADS broker and the pytest plugin that provides it."""

from ads.testing.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
