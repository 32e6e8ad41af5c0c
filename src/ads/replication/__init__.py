"""Partition replicas on this broker: the replica manager, partitions, purgatories.

Layer: may import storage, records, protocol, net, metadata and common; never the broker
or the coordinators (it tells them of leadership changes through listeners).
"""
