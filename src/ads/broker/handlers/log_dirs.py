"""DescribeLogDirs (key 35), versions 1-4: this broker's log directories and the size of
each partition replica in them (kafka-ui, AKHQ and consoles read topic sizes this way).

One result per directory of `log.dirs` (a directory without partitions is listed empty),
with its path, the replicas in it (leaders and followers alike) and, from v4, the total
and usable bytes of the volume it is on. A null topic list asks for every partition here;
partitions asked for that this broker has no replica of are left out, as in Kafka. Each
replica's offset lag is how far its log end is below the high watermark (never below 0;
there are no future logs, replicas do not move between directories here). Needs DESCRIBE
on the cluster: without it the answer is empty, with CLUSTER_AUTHORIZATION_FAILED from v3.
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


HANDLERS = [ApiHandler(m.DescribeLogDirsRequest, m.DescribeLogDirsResponse, 1, 4,
                       handle_describe_log_dirs)]
