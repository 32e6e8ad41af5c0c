"""Coordinators: the group coordinator with its offset manager (`group/`, `offsets.py`).

They keep their state in internal topics reached through the narrow `CoordinatorLog`
interface the broker hands them, and import only `storage`, `records` and `protocol`.
"""
