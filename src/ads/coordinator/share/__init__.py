"""The share coordinator on `__share_group_state` (KIP-932): the durable state of each
share-partition (share group, topic id, partition): its start offset and the states and
delivery counts of the records in flight. `records.py` is the topic's record layout,
`state.py` how state batches combine, `shard.py` one partition's share-partitions and
`coordinator.py` the facade the broker calls. `docs/share-groups.md` tells the whole of it."""
