"""`ads topics`: create, list, describe, delete, alter-config, add-partitions,
elect-leaders and reassign (`reassign.py`).

The verbs and output follow `kafka-topics.sh`, `kafka-configs.sh` and
`kafka-leader-election.sh`; every operation goes
through confluent-kafka's `AdminClient`, so it works against any Kafka-protocol cluster.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    ElectionType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from ads.cli.common import (
    INTERNAL_TOPICS,
    TIMEOUT_S,
    CommandError,
    UsageError,
    add_command,
    admin_client,
    connection_factory,
    describe_error,
    kafka_error_code,
    parse_assignments,
    result,
)
from ads.metadata.model import encode_topic_id

if TYPE_CHECKING:
    from ads.cli.logdump import PartitionFiles

_REQUEST = {"request_timeout": TIMEOUT_S}
_OPERATION = {"request_timeout": TIMEOUT_S, "operation_timeout": TIMEOUT_S}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    topics = sub.add_parser("topics", help=help_text)
    verbs = topics.add_subparsers(dest="topics_command", required=True, metavar="VERB")

    p = verbs.add_parser("create", help="create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, help="partition count (default: broker's)")
    p.add_argument("--replication-factor", type=int,
                   help="replicas per partition (default: broker's)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="succeed quietly when the topic already exists")
    add_command(p, "topics create", create)

    p = verbs.add_parser("list", help="list topic names")
    p.add_argument("--include-internal", action="store_true",
                   help="also list internal topics such as __consumer_offsets")
    add_command(p, "topics list", list_)

    p = verbs.add_parser("describe", help="describe topics, their partitions and offsets")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="default: all topics")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="the broker's log directory, when it is on this machine: adds each "
                        "partition's cleanable ratio (what the log cleaner compares with "
                        "min.cleanable.dirty.ratio), which no Kafka API reports")
    p.add_argument("--include-internal", action="store_true",
                   help="with no TOPIC, also describe internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica set")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader (offline)")
    p.add_argument("--replica-offsets", action="store_true",
                   help="also ask every replica's broker for its log end offset "
                        "(ReplicaLogEndOffsets: broker=offset; '?' when it cannot answer)")
    add_command(p, "topics describe", describe)

    p = verbs.add_parser("delete", help="delete topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true",
                   help="succeed quietly for topics that do not exist")
    add_command(p, "topics delete", delete)

    p = verbs.add_parser("alter-config", help="set or delete topic config overrides")
    p.add_argument("topic")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config override (repeatable)")
    p.add_argument("--delete", action="append", default=[], metavar="KEY",
                   help="remove a config override, back to the default (repeatable)")
    add_command(p, "topics alter-config", alter_config)

    p = verbs.add_parser("add-partitions", help="raise a topic's partition count")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, required=True,
                   help="the new total partition count")
    add_command(p, "topics add-partitions", add_partitions)

    p = verbs.add_parser("elect-leaders", help="move leadership to preferred replicas "
                                               "(or elect any live replica: unclean)")
    p.add_argument("--election-type", type=str.upper, choices=["PREFERRED", "UNCLEAN"],
                   default="PREFERRED", help="default PREFERRED")
    p.add_argument("--topic", help="the topic whose partitions to elect")
    p.add_argument("--partition", type=int, action="append", default=[], metavar="N",
                   help="with --topic: only this partition (repeatable)")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="every partition of every topic")
    add_command(p, "topics elect-leaders", elect_leaders)

    p = verbs.add_parser("reassign", help="move partitions' replicas to other brokers "
                                          "(like kafka-reassign-partitions.sh)")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"partitions":[{"topic":T,"partition":N,"replicas":[...]}]}')
    p.add_argument("--execute", action="store_true", help="start the reassignments")
    p.add_argument("--verify", action="store_true",
                   help="say whether each reassignment completed (exit 1 while one has not)")
    p.add_argument("--cancel", action="store_true", help="cancel them")
    p.add_argument("--list", action="store_true", help="show reassignments in progress")
    add_command(p, "topics reassign", _reassign)


def _reassign(args: argparse.Namespace) -> int:
    from ads.cli import reassign  # with the protocol's classes, loaded when used

    return reassign.reassign(args)


def _topic_names(admin: AdminClient, args: argparse.Namespace, include_internal: bool
                 ) -> list[str]:
    try:
        md = admin.list_topics(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise CommandError(describe_error(exc.args[0], args.bootstrap_server)) from exc
    return sorted(name for name in md.topics
                  if include_internal or name not in INTERNAL_TOPICS)


def create(args: argparse.Namespace) -> int:
    configs = parse_assignments(args.config, "--config")
    if args.partitions is not None and args.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise UsageError("--replication-factor must be at least 1")
    # -1 asks the broker for its num.partitions / default.replication.factor.
    topic = NewTopic(args.topic,
                     num_partitions=-1 if args.partitions is None else args.partitions,
                     replication_factor=(-1 if args.replication_factor is None
                                         else args.replication_factor),
                     config=configs)
    admin = admin_client(args)
    future = admin.create_topics([topic], **_OPERATION)[args.topic]
    try:
        result(future, args, args.topic)
    except CommandError:
        if args.if_not_exists and _already_exists(future):
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _already_exists(future: Any) -> bool:
    exc = future.exception(timeout=0)
    return isinstance(exc, KafkaException) and (
        kafka_error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS)


def list_(args: argparse.Namespace) -> int:
    for name in _topic_names(admin_client(args), args, args.include_internal):
        print(name)
    return 0


def describe(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    names = list(dict.fromkeys(args.topics)) or _topic_names(admin, args,
                                                             args.include_internal)
    if not names:
        return 0
    futures = admin.describe_topics(TopicCollection(names), **_REQUEST)
    descriptions = [result(futures[name], args, name) for name in names]

    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    config_futures = admin.describe_configs(resources, **_REQUEST)
    overrides: dict[str, list[str]] = {}
    for res in resources:
        entries = result(config_futures[res], args, res.name).values()
        overrides[res.name] = sorted(
            f"{e.name}={'<sensitive>' if e.is_sensitive else e.value}" for e in entries
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    partitions = [TopicPartition(d.name, p.id) for d in descriptions for p in d.partitions]
    start = _offsets(admin, args, partitions, OffsetSpec.earliest())
    end = _offsets(admin, args, partitions, OffsetSpec.latest())

    files: dict[Any, PartitionFiles] = {}
    if args.data_dir is not None:
        from ads.cli.logdump import scan_data_dir  # the storage layer, only when asked

        files = scan_data_dir(args.data_dir)
    replica_ends = _replica_ends(args, descriptions) if args.replica_offsets else {}
    # As kafka-topics.sh: a filter prints only the partitions that qualify, without topic
    # headers, so an empty output means "nothing to report".
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    lines: list[str] = []
    for d in descriptions:
        rf = len(d.partitions[0].replicas) if d.partitions else 0
        if not filtered:
            lines.append(f"Topic: {d.name}\tTopicId: {_topic_id(d.topic_id)}\t"
                         f"PartitionCount: {len(d.partitions)}\tReplicationFactor: {rf}\t"
                         f"Configs: {','.join(overrides[d.name])}")
        for p in sorted(d.partitions, key=lambda p: p.id):
            offline = p.leader is None or p.leader.id < 0
            under = len(p.isr) < len(p.replicas)
            if (args.under_replicated_partitions and not under) or (
                    args.unavailable_partitions and not offline):
                continue
            leader = "none" if offline else p.leader.id
            key = (d.name, p.id)
            state = "\tOffline" if offline else "\tUnderReplicated" if under else ""
            lines.append(
                f"\tTopic: {d.name}\tPartition: {p.id}\tLeader: {leader}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}\t"
                f"LogStartOffset: {start.get(key, '?')}\tLogEndOffset: {end.get(key, '?')}"
                + (f"\tCleanableRatio: {files[key].cleanable_ratio:.3f}" if key in files else "")
                + ("\tReplicaLogEndOffsets: " + _format_ends(
                    replica_ends, (r.id for r in p.replicas), *key)
                   if args.replica_offsets else "")
                + state)
    if lines:
        print("\n".join(lines))
    return 0


def _replica_ends(args: argparse.Namespace, descriptions: list[Any]
                  ) -> dict[tuple[int, str, int], int]:
    from ads.cli.replica_offsets import log_end_offsets

    return log_end_offsets(connection_factory(args), [
        (r.id, r.host, r.port, d.name, p.id) for d in descriptions
        for p in d.partitions for r in p.replicas])


def _topic_id(topic_id: Any) -> str:
    """confluent-kafka's `Uuid` (whose text is standard base64) in Kafka's form."""
    mask = (1 << 64) - 1
    bits = ((topic_id.get_most_significant_bits() & mask) << 64
            | (topic_id.get_least_significant_bits() & mask))
    return encode_topic_id(uuid.UUID(int=bits))


def _format_ends(ends: dict[tuple[int, str, int], int], nodes: Any, topic: str,
                 partition: int) -> str:
    from ads.cli.replica_offsets import format_ends

    return format_ends(ends, nodes, topic, partition)


def _ids(nodes: list[Any]) -> str:
    return ",".join(str(n.id) for n in nodes)


def _offsets(admin: AdminClient, args: argparse.Namespace, partitions: list[TopicPartition],
             spec: OffsetSpec) -> dict[tuple[str, int], int]:
    """One ListOffsets round for all partitions; a partition that fails shows as `?`."""
    if not partitions:
        return {}
    futures = admin.list_offsets({tp: spec for tp in partitions}, **_REQUEST)
    out: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = result(future, args).offset
        except CommandError:
            continue
    return out


def delete(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.topics))
    admin = admin_client(args)  # must outlive its futures: destroying it fails them
    futures = admin.delete_topics(names, **_OPERATION)
    failures: list[str] = []
    for name in names:
        try:
            result(futures[name], args, name)
        except CommandError as exc:
            exc_cause = futures[name].exception(timeout=0)
            if args.if_exists and isinstance(exc_cause, KafkaException) and (
                    kafka_error_code(exc_cause) == KafkaError.UNKNOWN_TOPIC_OR_PART):
                continue
            failures.append(str(exc))
            continue
        print(f"Deleted topic {name}.")
    if failures:
        raise CommandError(" ".join(failures))
    return 0


def alter_config(args: argparse.Namespace) -> int:
    sets = parse_assignments(args.set, "--set")
    deletes = [key.strip() for key in args.delete]
    if not sets and not deletes:
        raise UsageError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    if any(not key for key in deletes):
        raise UsageError("--delete needs a config name")
    both = sorted(set(sets) & set(deletes))
    if both:
        raise UsageError(f"config {both[0]!r} is both set and deleted")
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in sets.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deletes]
    resource = ConfigResource(ConfigResource.Type.TOPIC, args.topic,
                              incremental_configs=entries)
    admin = admin_client(args)
    futures = admin.incremental_alter_configs([resource], **_REQUEST)
    result(futures[resource], args, args.topic)
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    if args.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    admin = admin_client(args)
    futures = admin.create_partitions([NewPartitions(args.topic, args.partitions)],
                                      **_OPERATION)
    result(futures[args.topic], args, args.topic)
    print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def elect_leaders(args: argparse.Namespace) -> int:
    if bool(args.topic) == args.all_topic_partitions:
        raise UsageError("give --topic TOPIC or --all-topic-partitions")
    if args.partition and not args.topic:
        raise UsageError("--partition needs --topic")
    admin = admin_client(args)
    partitions = _partitions_to_elect(admin, args) if args.topic else None
    kind = args.election_type
    # No timeouts passed: confluent-kafka 2.x fails on elect_leaders' keyword arguments.
    future = admin.elect_leaders(ElectionType[kind], partitions)
    outcome: dict[TopicPartition, Any] = result(future, args, args.topic)
    done, noop, failed = _sort_election_outcome(outcome, args)
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions "
              f"{', '.join(done)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    if not (done or noop or failed):
        print(f"No partition needed a leader election ({kind}).")
    if failed:
        for line in failed:
            print(f"Error completing leader election ({kind}) for partition {line}",
                  file=sys.stderr)
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0


def _partitions_to_elect(admin: AdminClient, args: argparse.Namespace) -> list[TopicPartition]:
    """--topic's partitions: those --partition names, else all of them."""
    indexes = args.partition
    if not indexes:
        md = admin.list_topics(args.topic, timeout=TIMEOUT_S)
        topic = md.topics.get(args.topic)
        if topic is None or topic.error is not None:
            raise CommandError(f"Topic '{args.topic}' does not exist.")
        indexes = sorted(topic.partitions)
    return [TopicPartition(args.topic, p) for p in indexes]


def _sort_election_outcome(outcome: dict[TopicPartition, Any], args: argparse.Namespace
                           ) -> tuple[list[str], list[str], list[str]]:
    """The partitions elected, those that needed no election, and the failures
    (each with its error), in partition order."""
    done, noop, failed = [], [], []
    for tp, error in sorted(outcome.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        name = f"{tp.topic}-{tp.partition}"
        # confluent-kafka gives a KafkaError (or an exception holding one) per partition.
        err = error.args[0] if isinstance(error, KafkaException) else error
        if err is None:
            done.append(name)
        elif isinstance(err, KafkaError) and err.code() == KafkaError.ELECTION_NOT_NEEDED:
            noop.append(name)
        elif isinstance(err, KafkaError):
            failed.append(f"{name}: {describe_error(err, args.bootstrap_server)}")
        else:
            failed.append(f"{name}: {err}")
    return done, noop, failed
