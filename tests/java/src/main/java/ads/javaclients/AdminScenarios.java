package ads.javaclients;

import static ads.javaclients.ProducerScenarios.bytes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.LogDirNotFoundException;
import org.apache.kafka.common.errors.ReplicaNotAvailableException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/** The Admin client: topics, configs, partitions, offsets, records, leaders, reassignments,
 * producers, transactions and consumer groups, each checked against what was done. */
final class AdminScenarios {
    private AdminScenarios() {}

    static final int WAIT_S = 30;

    static <T> T get(org.apache.kafka.common.KafkaFuture<T> future) throws Exception {
        return future.get(WAIT_S, TimeUnit.SECONDS);
    }

    static void admin(Env env) throws Exception {
        String topic = env.name("t");
        String other = env.name("doomed");
        try (Admin admin = env.admin()) {
            cluster(admin);
            env.createTopic(admin, topic, 2, Map.of("retention.ms", "3600000"));
            env.createTopic(admin, other, 1, Map.of());
            Set<String> names = get(admin.listTopics().names());
            Check.that(names.containsAll(Set.of(topic, other)), "listTopics has both topics",
                    names.size() + " topics");
            TopicDescription d = get(admin.describeTopics(List.of(topic)).allTopicNames())
                    .get(topic);
            Check.equal(2, d.partitions().size(), "describeTopics partitions");
            Check.equal(3, d.partitions().get(0).replicas().size(), "replicas of partition 0");
            Check.that(d.topicId() != null, "describeTopics has a topic id", d.topicId());
            configs(admin, topic);
            get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
            Env.waitFor(() -> partitions(admin, topic) == 4, "4 partitions", WAIT_S);
            Check.equal(4, partitions(admin, topic), "partitions after createPartitions");
            offsetsAndRecords(env, admin, topic);
            leadersAndReassignments(admin, topic);
            transactions(env, admin, topic);
            Check.caused(catching(() -> get(admin.describeAcls(AclBindingFilter.ANY).values())),
                    "describeAcls without an authorizer", SecurityDisabledException.class);
            get(admin.deleteTopics(List.of(other)).all());
            Env.waitFor(() -> !listTopics(admin).contains(other), "the deleted topic unlisted",
                    WAIT_S);
            Check.caused(catching(() -> get(admin.describeTopics(List.of(other))
                    .allTopicNames())), "describeTopics of the deleted topic",
                    UnknownTopicOrPartitionException.class);
        }
    }

    private static void cluster(Admin admin) throws Exception {
        DescribeClusterResult c = admin.describeCluster();
        Collection<Node> nodes = get(c.nodes());
        Set<Integer> ids = new TreeSet<>();
        nodes.forEach(n -> ids.add(n.id()));
        Check.equal(Set.of(1, 2, 3), ids, "describeCluster node ids");
        Node controller = get(c.controller());
        Check.that(controller != null && ids.contains(controller.id()),
                "describeCluster controller is a node", controller);
        String clusterId = get(c.clusterId());
        Check.that(clusterId != null && !clusterId.isEmpty(), "describeCluster cluster id",
                clusterId);
    }

    private static void configs(Admin admin, String topic) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Check.equal("3600000", config(admin, res, "retention.ms").value(),
                "describeConfigs retention.ms (set at creation)");
        Check.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                config(admin, res, "retention.ms").source(), "source of retention.ms");
        String defaultMax = config(admin, res, "max.message.bytes").value();
        Check.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG,
                config(admin, res, "max.message.bytes").source(), "source of max.message.bytes");
        get(admin.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"),
                        AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"),
                        AlterConfigOp.OpType.SET)))).all());
        Check.equal("7200000", config(admin, res, "retention.ms").value(),
                "retention.ms after incrementalAlterConfigs SET");
        Check.equal("2000000", config(admin, res, "max.message.bytes").value(),
                "max.message.bytes after SET");
        get(admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE))))
                .all());
        Check.equal(defaultMax, config(admin, res, "max.message.bytes").value(),
                "max.message.bytes after DELETE (the default again)");
    }

    private static ConfigEntry config(Admin admin, ConfigResource res, String key)
            throws Exception {
        Config c = get(admin.describeConfigs(List.of(res)).all()).get(res);
        ConfigEntry e = c.get(key);
        if (e == null) {
            throw new Check.Failed("describeConfigs of " + res + " has no " + key);
        }
        return e;
    }

    private static void offsetsAndRecords(Env env, Admin admin, String topic) throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        long base = 1_700_000_000_000L;
        try (KafkaProducer<byte[], byte[]> producer = env.producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + i * 10L, null, bytes("x" + i)));
            }
            producer.flush();
        }
        Check.equal(0L, listOffset(admin, p0, OffsetSpec.earliest()).offset(),
                "listOffsets earliest");
        Check.equal(10L, listOffset(admin, p0, OffsetSpec.latest()).offset(),
                "listOffsets latest");
        ListOffsetsResultInfo max = listOffset(admin, p0, OffsetSpec.maxTimestamp());
        Check.equal(9L, max.offset(), "listOffsets maxTimestamp offset");
        Check.equal(base + 90, max.timestamp(), "listOffsets maxTimestamp timestamp");
        Check.equal(5L, listOffset(admin, p0, OffsetSpec.forTimestamp(base + 45)).offset(),
                "listOffsets forTimestamp");
        long low = get(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(4)))
                .lowWatermarks().get(p0)).lowWatermark();
        Check.equal(4L, low, "deleteRecords low watermark");
        Check.equal(4L, listOffset(admin, p0, OffsetSpec.earliest()).offset(),
                "listOffsets earliest after deleteRecords");

        Collection<PartitionProducerState> states = List.of(get(
                admin.describeProducers(List.of(p0)).partitionResult(p0)));
        List<ProducerState> active = states.iterator().next().activeProducers();
        Check.equal(1, active.size(), "describeProducers active producers");
        Check.equal(9, active.get(0).lastSequence(), "describeProducers last sequence");
        Check.equal(Optional.empty(), active.get(0).currentTransactionStartOffset()
                .isPresent() ? Optional.of(active.get(0).currentTransactionStartOffset()
                .getAsLong()) : Optional.empty(), "describeProducers open transaction");
    }

    private static ListOffsetsResultInfo listOffset(Admin admin, TopicPartition tp,
            OffsetSpec spec) throws Exception {
        return get(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp));
    }

    /**
     * Reorders partition 0's replicas (a new preferred leader, same brokers), elects the
     * preferred leader, and shrinks partition 1 to two replicas.
     */
    private static void leadersAndReassignments(Admin admin, String topic) throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        List<Integer> replicas = new ArrayList<>();
        Env.partition(admin, topic, 0).replicas().forEach(n -> replicas.add(n.id()));
        int leader = Env.partition(admin, topic, 0).leader().id();
        List<Integer> reordered = new ArrayList<>(replicas);
        reordered.remove(Integer.valueOf(leader));
        reordered.add(leader);
        List<Integer> shrunk = new ArrayList<>();
        Env.partition(admin, topic, 1).replicas().forEach(n -> shrunk.add(n.id()));
        shrunk.remove(shrunk.size() - 1);
        get(admin.alterPartitionReassignments(Map.of(
                p0, Optional.of(new NewPartitionReassignment(reordered)),
                p1, Optional.of(new NewPartitionReassignment(shrunk)))).all());
        Env.waitFor(() -> replicaIds(admin, topic, 0).equals(reordered)
                && replicaIds(admin, topic, 1).equals(shrunk), "reassignments applied", WAIT_S);
        Check.equal(reordered, replicaIds(admin, topic, 0), "partition 0 replicas reordered");
        Check.equal(shrunk, replicaIds(admin, topic, 1), "partition 1 replicas shrunk");
        Env.waitFor(() -> {
            try {
                return get(admin.listPartitionReassignments(Set.of(p0, p1)).reassignments())
                        .isEmpty();
            } catch (Exception e) {
                return false;
            }
        }, "no reassignment listed once done", WAIT_S);
        Check.saw("listPartitionReassignments is empty once both are done");
        int before = Env.partition(admin, topic, 0).leader().id();
        Map<TopicPartition, Optional<Throwable>> elected = get(admin.electLeaders(
                ElectionType.PREFERRED, Set.of(p0)).partitions());
        if (before == reordered.get(0)) {
            Check.that(elected.get(p0).isPresent()
                    && elected.get(p0).get() instanceof ElectionNotNeededException,
                    "electLeaders: not needed (the reassignment moved the leader)", elected);
        } else {
            Check.equal(Optional.empty(), elected.get(p0), "electLeaders PREFERRED result");
        }
        Env.waitFor(() -> {
            try {
                return Env.partition(admin, topic, 0).leader().id() == reordered.get(0);
            } catch (Exception e) {
                return false;
            }
        }, "the preferred replica leads", WAIT_S);
        Check.equal(reordered.get(0), Env.partition(admin, topic, 0).leader().id(),
                "leader after electLeaders (was " + before + ")");
        Map<TopicPartition, Optional<Throwable>> again = get(admin.electLeaders(
                ElectionType.PREFERRED, Set.of(p0)).partitions());
        Check.that(again.get(p0).isPresent()
                && again.get(p0).get() instanceof ElectionNotNeededException,
                "electLeaders again: ElectionNotNeededException", again);
    }

    private static void transactions(Env env, Admin admin, String topic) throws Exception {
        String id = env.name("txn");
        TopicPartition p2 = new TopicPartition(topic, 2);
        try (KafkaProducer<byte[], byte[]> txn = TransactionScenarios.transactional(env, id)) {
            txn.initTransactions();
            txn.beginTransaction();
            txn.send(new ProducerRecord<>(topic, 2, null, bytes("in-txn")));
            txn.flush();
            TransactionDescription open = get(admin.describeTransactions(List.of(id))
                    .description(id));
            Check.equal(TransactionState.ONGOING, open.state(), "describeTransactions state");
            Check.equal(Set.of(p2), open.topicPartitions(), "describeTransactions partitions");
            Collection<TransactionListing> ongoing = get(admin.listTransactions(
                    new ListTransactionsOptions().filterStates(Set.of(TransactionState.ONGOING)))
                    .all());
            Check.that(ongoing.stream().anyMatch(t -> t.transactionalId().equals(id)
                    && t.producerId() == open.producerId()),
                    "listTransactions(ONGOING) has it", ongoing.size() + " listed");
            List<ProducerState> producers = get(admin.describeProducers(List.of(p2))
                    .partitionResult(p2)).activeProducers();
            Check.equal(1, producers.size(), "describeProducers on the open txn's partition");
            Check.equal(open.producerId(), producers.get(0).producerId(),
                    "describeProducers producer id");
            Check.equal(0L, producers.get(0).currentTransactionStartOffset().orElse(-1),
                    "describeProducers current transaction start offset");
            txn.commitTransaction();
            Env.waitFor(() -> {
                try {
                    return get(admin.describeTransactions(List.of(id)).description(id)).state()
                            == TransactionState.COMPLETE_COMMIT;
                } catch (Exception e) {
                    return false;
                }
            }, "the transaction completes its commit", WAIT_S);
            Check.saw("describeTransactions: CompleteCommit after commitTransaction");
            Collection<TransactionListing> all = get(admin.listTransactions().all());
            Check.that(all.stream().anyMatch(t -> t.transactionalId().equals(id)
                    && t.state() == TransactionState.COMPLETE_COMMIT),
                    "listTransactions has it committed", all.size() + " listed");
        }
    }

    /**
     * The group APIs: a classic group while it has a member and once empty, a
     * consumer-protocol group, then offsets listed, altered and deleted, and the groups
     * deleted.
     */
    @SuppressWarnings("deprecation")
    static void groups(Env env) throws Exception {
        String topic = env.name("t");
        String classic = env.name("classic");
        String modern = env.name("consumer");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = env.admin()) {
            env.createTopic(admin, topic, 2, Map.of());
            GroupScenarios.produce2(env, topic, 5);
            try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of(
                    ConsumerConfig.GROUP_ID_CONFIG, classic))) {
                c.subscribe(List.of(topic));
                Check.equal(10, Env.pollCount(c, 10, 30).size(), "records the member read");
                c.commitSync();
                ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(classic))
                        .describedGroups().get(classic));
                Check.equal(ConsumerGroupState.STABLE, d.state(), "describeConsumerGroups state");
                Check.equal(GroupType.CLASSIC, d.type(), "describeConsumerGroups type");
                Check.equal(1, d.members().size(), "describeConsumerGroups members");
                Check.equal(Set.of(p0, p1), d.members().iterator().next().assignment()
                        .topicPartitions(), "the member's assignment");
                Check.equal("range", d.partitionAssignor(), "the group's assignor");
            }
            try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of(
                    ConsumerConfig.GROUP_ID_CONFIG, modern, "group.protocol", "consumer"))) {
                c.subscribe(List.of(topic));
                Check.equal(10, Env.pollCount(c, 10, 30).size(),
                        "records the consumer-protocol member read");
                ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(modern))
                        .describedGroups().get(modern));
                Check.equal(GroupType.CONSUMER, d.type(), "consumer-protocol group's type");
                Check.equal(1, d.members().size(), "its members");
                Check.equal(Set.of(p0, p1), d.members().iterator().next().assignment()
                        .topicPartitions(), "its member's assignment");
                Check.equal(ConsumerGroupState.STABLE, d.state(), "its state");
            }
            ConsumerGroupDescription empty = get(admin.describeConsumerGroups(List.of(classic))
                    .describedGroups().get(classic));
            Check.equal(ConsumerGroupState.EMPTY, empty.state(), "state once the member left");
            Check.equal(0, empty.members().size(), "members once the member left");
            Collection<ConsumerGroupListing> listed = get(admin.listConsumerGroups().all());
            Set<String> ids = new TreeSet<>();
            listed.forEach(g -> ids.add(g.groupId()));
            Check.that(ids.containsAll(Set.of(classic, modern)), "listConsumerGroups has both",
                    ids.size() + " groups");
            Check.equal(Map.of(p0, 5L, p1, 5L), groupOffsets(admin, classic),
                    "listConsumerGroupOffsets");
            get(admin.alterConsumerGroupOffsets(classic, Map.of(p0, new OffsetAndMetadata(2)))
                    .all());
            Check.equal(Map.of(p0, 2L, p1, 5L), groupOffsets(admin, classic),
                    "offsets after alterConsumerGroupOffsets");
            get(admin.deleteConsumerGroupOffsets(classic, Set.of(p1)).all());
            Check.equal(Map.of(p0, 2L), groupOffsets(admin, classic),
                    "offsets after deleteConsumerGroupOffsets");
            get(admin.deleteConsumerGroups(List.of(classic)).all());
            Set<String> after = new TreeSet<>();
            get(admin.listConsumerGroups().all()).forEach(g -> after.add(g.groupId()));
            Check.that(!after.contains(classic), "listConsumerGroups after deleteConsumerGroups",
                    after);
            Check.caused(catching(() -> get(admin.deleteConsumerGroups(List.of(classic)).all())),
                    "deleting it again", GroupIdNotFoundException.class);
        }
    }

    private static Map<TopicPartition, Long> groupOffsets(Admin admin, String group)
            throws Exception {
        Map<TopicPartition, Long> out = new HashMap<>();
        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata())
                .forEach((tp, o) -> out.put(tp, o.offset()));
        return out;
    }

    /**
     * describeLogDirs and describeReplicaLogDirs (DescribeLogDirs): every broker's log
     * directory with its replicas and their sizes; describeTopics paged two partitions at a
     * time, which the 4.x client asks with DescribeTopicPartitions (KIP-966).
     */
    static void logDirsAndPartitions(Env env) throws Exception {
        try (Admin admin = env.admin()) {
            String topic = env.name("t");
            env.createTopic(admin, topic, 5, Map.of());
            try (KafkaProducer<byte[], byte[]> p = env.producer(Map.of())) {
                for (int i = 0; i < 50; i++) {
                    p.send(new ProducerRecord<>(topic, i % 5, null, bytes("v" + i)))
                            .get(WAIT_S, TimeUnit.SECONDS);
                }
            }
            List<Integer> ids = get(admin.describeCluster().nodes()).stream().map(Node::id)
                    .sorted().toList();
            Map<Integer, Map<String, LogDirDescription>> dirs =
                    get(admin.describeLogDirs(ids).allDescriptions());
            Check.equal(ids, new ArrayList<>(new TreeSet<>(dirs.keySet())), "brokers described");
            for (Map.Entry<Integer, Map<String, LogDirDescription>> e : dirs.entrySet()) {
                Check.equal(1, e.getValue().size(), "log dirs of broker " + e.getKey());
                LogDirDescription d = e.getValue().values().iterator().next();
                Check.that(d.error() == null, "log dir without error", d.error());
                Check.that(d.totalBytes().orElse(-1) > 0
                        && d.usableBytes().orElse(-1) <= d.totalBytes().orElse(-1),
                        "volume sizes", d);
                long size = 0;
                int replicas = 0;
                for (Map.Entry<TopicPartition, ReplicaInfo> r : d.replicaInfos().entrySet()) {
                    if (r.getKey().topic().equals(topic)) {
                        replicas++;
                        size += r.getValue().size();
                        Check.that(!r.getValue().isFuture(), "not a future replica", r);
                    }
                }
                Check.equal(5, replicas, "replicas on broker " + e.getKey());
                Check.that(size > 0, "replica bytes on broker " + e.getKey(), size);
            }
            TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, ids.get(0));
            ReplicaLogDirInfo where = get(admin.describeReplicaLogDirs(List.of(replica)).all())
                    .get(replica);
            Check.that(where != null && where.getCurrentReplicaLogDir() != null
                    && where.getFutureReplicaLogDir() == null, "describeReplicaLogDirs", where);
            alterReplicaLogDirs(env, admin, replica, where.getCurrentReplicaLogDir(), ids,
                    dirs.get(ids.get(1)).keySet().iterator().next());

            TopicDescription described = get(admin.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().partitionSizeLimitPerResponse(2))
                    .allTopicNames()).get(topic);
            Check.equal(List.of(0, 1, 2, 3, 4), described.partitions().stream()
                    .map(TopicPartitionInfo::partition).toList(), "partitions described");
            for (TopicPartitionInfo info : described.partitions()) {
                Check.that(info.leader() != null && info.isr().size() == 3,
                        "leader and ISR of partition " + info.partition(), info);
            }
            if (Env.clientVersion().startsWith("4.")) {
                // Only DescribeTopicPartitions carries eligible leader replicas; Metadata
                // leaves them unknown.
                Check.that(described.partitions().get(0).elr() != null,
                        "answered by DescribeTopicPartitions", described.partitions().get(0));
            }
            Check.saw("describeFeatures: " + get(admin.describeFeatures().featureMetadata()));
        }
    }

    /**
     * alterReplicaLogDirs with one log directory per broker, answered as Kafka answers it:
     * the replica's own directory, nothing to do; a path that is no log directory,
     * LogDirNotFoundException; a broker without a replica of the partition,
     * ReplicaNotAvailableException.
     */
    private static void alterReplicaLogDirs(Env env, Admin admin, TopicPartitionReplica replica,
            String current, List<Integer> ids, String secondBrokersDir) throws Exception {
        get(admin.alterReplicaLogDirs(Map.of(replica, current)).all());
        Check.saw("alterReplicaLogDirs into " + current + ": done (already there)");
        Check.caused(catching(() -> get(admin.alterReplicaLogDirs(Map.of(replica,
                current + "-elsewhere")).all())), "alterReplicaLogDirs into no log directory",
                LogDirNotFoundException.class);
        String single = env.name("one-replica");
        admin.createTopics(List.of(new NewTopic(single, Map.of(0, List.of(ids.get(0))))))
                .all().get(WAIT_S, TimeUnit.SECONDS);
        Env.waitFor(() -> {
            try {
                return Env.partition(admin, single, 0).leader() != null;
            } catch (Exception e) {
                return false;
            }
        }, "a leader for " + single, WAIT_S);
        TopicPartitionReplica missing = new TopicPartitionReplica(single, 0, ids.get(1));
        Check.caused(catching(() -> get(admin.alterReplicaLogDirs(Map.of(missing,
                secondBrokersDir)).all())), "alterReplicaLogDirs of a replica the broker does not have",
                ReplicaNotAvailableException.class);
    }

    interface Call {
        void run() throws Exception;
    }

    static Throwable catching(Call call) {
        try {
            call.run();
        } catch (Exception e) {
            return e;
        }
        throw new Check.Failed("the call succeeded");
    }

    static int partitions(Admin admin, String topic) {
        try {
            return get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic)
                    .partitions().size();
        } catch (Exception e) {
            return -1;
        }
    }

    static Set<String> listTopics(Admin admin) {
        try {
            return get(admin.listTopics().names());
        } catch (Exception e) {
            return Set.of();
        }
    }

    static List<Integer> replicaIds(Admin admin, String topic, int partition) {
        try {
            List<Integer> out = new ArrayList<>();
            Env.partition(admin, topic, partition).replicas().forEach(n -> out.add(n.id()));
            return out;
        } catch (Exception e) {
            return List.of();
        }
    }
}
