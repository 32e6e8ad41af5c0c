"""`ads topics reassign`: partition reassignment, as `kafka-reassign-partitions.sh` does it.

`--execute` starts the reassignments of a JSON file in Kafka's format
(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}`), `--cancel`
cancels them, `--verify` says for each whether it completed, `--list` shows those in
progress. The AdminClient of confluent-kafka has no reassignment calls, so this speaks
AlterPartitionReassignments and ListPartitionReassignments itself (`ads.client`) to the
controller found in Metadata.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ads.cli.common import TIMEOUT_S, CommandError, UsageError, connect_broker
from ads.client import ClientError, Connection, parse_servers
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

Plan = dict[tuple[str, int], list[int]]


def read_plan(path: str) -> Plan:
    try:
        data: Any = json.loads(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from exc
    plan: Plan = {}
    try:
        for entry in data["partitions"]:
            plan[(str(entry["topic"]), int(entry["partition"]))] = [
                int(r) for r in entry["replicas"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: expected {{\"partitions\": [{{\"topic\": ..., "
                         f"\"partition\": ..., \"replicas\": [...]}}]}}") from exc
    if not plan:
        raise UsageError(f"{path} names no partition")
    return plan


def _metadata(conn: Connection, topics: list[str] | None) -> m.MetadataResponse:
    req = m.MetadataRequest(topics=None if topics is None else [
        m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    resp = conn.request(m.ApiKey.METADATA, 9, req)
    assert isinstance(resp, m.MetadataResponse)
    return resp


def _controller(args: argparse.Namespace) -> Connection:
    try:
        servers = parse_servers(args.bootstrap_server)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    md: m.MetadataResponse | None = None
    failure: Exception | None = None
    for host, port in servers:  # the first that answers, as a client's bootstrap does
        try:
            conn = connect_broker(args, host, port)
        except CommandError as exc:
            failure = exc
            continue
        try:
            md = _metadata(conn, [])
            break
        except ClientError as exc:
            conn.close()
            failure = exc
    if md is None:
        raise CommandError(f"cannot reach {args.bootstrap_server}: {failure}")
    node = next((b for b in md.brokers if b.node_id == md.controller_id), None)
    if node is None:
        conn.close()
        raise CommandError("the cluster has no controller now")
    if (node.host, node.port) != (host, port):
        conn.close()
        conn = connect_broker(args, node.host, node.port)
    return conn


def _alter(args: argparse.Namespace, plan: dict[tuple[str, int], list[int] | None]
           ) -> list[str]:
    """Sends the plan; returns the partitions it failed for, with why."""
    by_topic: dict[str, list[m.AlterPartitionReassignmentsRequest.ReassignableTopic
                             .ReassignablePartition]] = {}
    T = m.AlterPartitionReassignmentsRequest.ReassignableTopic  # noqa: N806
    for (topic, partition), replicas in plan.items():
        by_topic.setdefault(topic, []).append(
            T.ReassignablePartition(partition_index=partition, replicas=replicas))
    req = m.AlterPartitionReassignmentsRequest(
        timeout_ms=int(TIMEOUT_S * 1000),
        topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
    with _controller(args) as conn:
        try:
            resp = conn.request(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, req)
        except ClientError as exc:
            raise CommandError(str(exc)) from exc
    assert isinstance(resp, m.AlterPartitionReassignmentsResponse)
    if resp.error_code != ErrorCode.NONE:
        raise CommandError(f"{ErrorCode(resp.error_code).name}: {resp.error_message}")
    return [f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
            + (f" ({p.error_message})" if p.error_message else "")
            for t in resp.responses for p in t.partitions if p.error_code]


def _ongoing(args: argparse.Namespace) -> dict[tuple[str, int], tuple[list[int], list[int],
                                                                      list[int]]]:
    with _controller(args) as conn:
        try:
            resp = conn.request(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                                m.ListPartitionReassignmentsRequest(
                                    timeout_ms=int(TIMEOUT_S * 1000), topics=None))
        except ClientError as exc:
            raise CommandError(str(exc)) from exc
    assert isinstance(resp, m.ListPartitionReassignmentsResponse)
    if resp.error_code != ErrorCode.NONE:
        raise CommandError(f"{ErrorCode(resp.error_code).name}: {resp.error_message}")
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in resp.topics for p in t.partitions}


def _names(keys: list[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


def reassign(args: argparse.Namespace) -> int:
    modes = [args.execute, args.verify, args.cancel, args.list]
    if sum(modes) != 1:
        raise UsageError("give one of --execute, --verify, --cancel, --list")
    if args.list:
        for (t, p), (replicas, adding, removing) in sorted(_ongoing(args).items()):
            print(f"Partition {t}-{p}: replicas {_ids(replicas)}; adding {_ids(adding)}; "
                  f"removing {_ids(removing)}")
        return 0
    if not args.reassignment_json_file:
        raise UsageError("--reassignment-json-file is required")
    plan = read_plan(args.reassignment_json_file)
    if args.verify:
        return _verify(args, plan)
    failed = _alter(args, {k: (None if args.cancel else v) for k, v in plan.items()})
    done = [k for k in plan if not any(f.startswith(f"{k[0]}-{k[1]}:") for f in failed)]
    if done:
        verb = "cancelled" if args.cancel else "started"
        print(f"Successfully {verb} partition reassignment{'s' if len(done) > 1 else ''} "
              f"for {_names(done)}")
    if failed:
        raise CommandError("; ".join(failed))
    return 0


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def _verify(args: argparse.Namespace, plan: Plan) -> int:
    ongoing = _ongoing(args)
    with _controller(args) as conn:
        md = _metadata(conn, sorted({t for t, _ in plan}))
    current = {(t.name, p.partition_index): list(p.replica_nodes)
               for t in md.topics for p in t.partitions}
    print("Status of partition reassignment:")
    pending = False
    for (t, p), target in sorted(plan.items()):
        if (t, p) in ongoing:
            pending = True
            print(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == target:
            print(f"Reassignment of partition {t}-{p} is completed.")
        else:
            pending = True
            print(f"There is no active reassignment of partition {t}-{p}, but replica set "
                  f"is {current.get((t, p))} rather than {target}.")
    return 1 if pending else 0
