"""The group coordinator: classic groups (`classic.py`, `rebalance.py`), KIP-848 consumer
groups (`consumer.py`, `assignors.py`) and the facade the broker calls (`coordinator.py`)."""
