"""The group coordinator on `__consumer_offsets`: the facade the broker calls
(`coordinator.py`) and its values (`api.py`), the per-partition state (`shard.py`), classic
groups (`state.py`, `classic.py`, `rebalance.py`), KIP-848 consumer groups
(`consumer_state.py`, `consumer.py`, `assignors.py`), the offset cache (`offsets.py`) and
the topic's record layout (`records.py`)."""
