"""The transaction coordinator on `__transaction_state`: the facade the broker calls
(`coordinator.py`, with the marker tasks and the `MarkerWriter` interface), the state
machine of a transactional id and its answer tables (`state.py`), one partition's ids
(`shard.py`) and the topic's record layout (`records.py`). `docs/transactions.md` tells the
whole protocol."""
