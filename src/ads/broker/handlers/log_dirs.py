"""DescribeLogDirs (key 35), versions 1-4: this broker's log directories and the size of
each partition replica in them (kafka-ui, AKHQ and consoles read topic sizes this way);
and AlterReplicaLogDirs (key 34), versions 1-2, on a broker with one log directory.

One result per directory of `log.dirs` (a directory without partitions is listed empty),
with its path, the replicas in it (leaders and followers alike) and, from v4, the total
and usable bytes of the volume it is on. A null topic list asks for every partition here;
partitions asked for that this broker has no replica of are left out, as in Kafka. Each
replica's offset lag is how far its log end is below the high watermark (never below 0;
there are no future logs, replicas do not move between directories here). Needs DESCRIBE
on the cluster: without it the answer is empty, with CLUSTER_AUTHORIZATION_FAILED from v3.

AlterReplicaLogDirs asks to move replicas into another of the broker's directories. ADS
does not move replicas between directories, so only a broker with one log directory
serves it (`HANDLERS_ONE_LOG_DIR`); one with several does not advertise it. With one
directory the answers are Kafka's: the directory a replica is already in, NONE (nothing to
do); a path that is not a configured log directory (compared as an absolute path, as
given), LOG_DIR_NOT_FOUND; a partition of the cluster this broker has no replica of,
REPLICA_NOT_AVAILABLE, and one the cluster does not have, UNKNOWN_TOPIC_OR_PARTITION; a
topic whose name is too long for a "future" directory name, INVALID_TOPIC_EXCEPTION. A
partition named twice takes its last directory. Needs ALTER on the cluster, else every
partition gets CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import os
from pathlib import Path

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

R = m.DescribeLogDirsResponse
A = m.AlterReplicaLogDirsResponse
# The longest name a partition's directory may have, and what a move's "future" directory
# adds to `<topic>-<partition>`: a dot, 32 hex digits and "-future".
MAX_DIR_NAME = 255
FUTURE_SUFFIX = len(".") + 32 + len("-future")
Result = R.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Part = Topic.DescribeLogDirsPartition


def handle_describe_log_dirs(ctx: RequestContext, req: m.DescribeLogDirsRequest
                             ) -> m.DescribeLogDirsResponse:
    rule = P.DESCRIBE_LOG_DIRS
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return R(throttle_time_ms=0, error_code=rule.error, results=[])
    wanted = None if req.topics is None else {t.topic: set(t.partitions) for t in req.topics}
    rm = ctx.broker.replica_manager
    by_dir: dict[Path, dict[str, list[Part]]] = {d: {} for d in rm.log_dirs()}
    for part in rm:
        if wanted is not None and part.index not in wanted.get(part.topic, ()):
            continue
        by_dir.setdefault(part.log_dir, {}).setdefault(part.topic, []).append(Part(
            partition_index=part.index, partition_size=part.size_bytes,
            offset_lag=max(part.high_watermark - part.log_end_offset, 0), is_future_key=False))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE,
             results=[_result(d, topics) for d, topics in by_dir.items()])


def _result(directory: Path, topics: dict[str, list[Part]]) -> Result:
    total = usable = -1
    try:
        vfs = os.statvfs(directory)
        total, usable = vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
    except OSError:
        pass  # the volume's sizes stay unknown (-1), as the schema's default says
    return Result(
        error_code=ErrorCode.NONE, log_dir=str(directory.absolute()),
        topics=[Topic(name=name, partitions=sorted(parts, key=lambda p: p.partition_index))
                for name, parts in sorted(topics.items())],
        total_bytes=total, usable_bytes=usable)


def handle_alter_replica_log_dirs(ctx: RequestContext, req: m.AlterReplicaLogDirsRequest
                                  ) -> m.AlterReplicaLogDirsResponse:
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for index in t.partitions:
                wanted[(t.name, index)] = d.path
    rule = P.ALTER_REPLICA_LOG_DIRS
    allowed = ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation)
    rm = ctx.broker.replica_manager
    dirs = {str(d.absolute()) for d in rm.log_dirs()}
    by_topic: dict[str, list[A.AlterReplicaLogDirTopicResult.AlterReplicaLogDirPartitionResult]]
    by_topic = {}
    topics = ctx.broker.metadata.topics
    for (topic, index), path in wanted.items():
        known = (state := topics.get(topic)) is not None and 0 <= index < len(state.partitions)
        error = rule.error if not allowed else _alter_error(
            rm.get(topic, index) is not None, known, len(f"{topic}-{index}"), path, dirs)
        by_topic.setdefault(topic, []).append(
            A.AlterReplicaLogDirTopicResult.AlterReplicaLogDirPartitionResult(
                partition_index=index, error_code=error))
    return A(throttle_time_ms=0, results=[
        A.AlterReplicaLogDirTopicResult(topic_name=topic, partitions=parts)
        for topic, parts in by_topic.items()])


def _alter_error(hosted: bool, known: bool, name_length: int, path: str,
                 dirs: set[str]) -> ErrorCode:
    if name_length + FUTURE_SUFFIX > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if path not in dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if not hosted:  # a partition of the cluster, with no replica here; or no partition
        return ErrorCode.REPLICA_NOT_AVAILABLE if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # One log directory: the replica is in `path` already, there is nothing to move.
    return ErrorCode.NONE


HANDLERS = [ApiHandler(m.DescribeLogDirsRequest, m.DescribeLogDirsResponse, 1, 4,
                       handle_describe_log_dirs)]
HANDLERS_ONE_LOG_DIR = [ApiHandler(m.AlterReplicaLogDirsRequest, m.AlterReplicaLogDirsResponse,
                                   1, 2, handle_alter_replica_log_dirs)]
