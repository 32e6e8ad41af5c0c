package ads.javaclients;

import static ads.javaclients.AdminScenarios.catching;
import static ads.javaclients.AdminScenarios.get;
import static ads.javaclients.ProducerScenarios.bytes;
import static ads.javaclients.ProducerScenarios.text;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/** The Admin calls operators reach for less often: fencing producers, aborting a hanging
 * transaction, removing a static member, client quotas, SCRAM credentials, ACLs. */
final class AdminExtraScenarios {
    private AdminExtraScenarios() {}

    static void extra(Env env) throws Exception {
        try (Admin admin = env.admin()) {
            fenceProducers(env, admin);
            abortTransaction(env, admin);
            removeStaticMember(env, admin);
            quotas(env, admin);
            scram(env, admin);
            Check.caused(catching(() -> get(admin.createAcls(List.of(new AclBinding(
                    new ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ,
                            AclPermissionType.ALLOW)))).all())),
                    "createAcls without an authorizer", SecurityDisabledException.class);
        }
    }

    /** fenceProducers bumps the epoch of a transactional id: its producer is fenced. */
    private static void fenceProducers(Env env, Admin admin) throws Exception {
        String topic = env.name("fence");
        String id = env.name("fenced-id");
        env.createTopic(admin, topic, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p = TransactionScenarios.transactional(env, id)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, bytes("before-fence"))).get(10, TimeUnit.SECONDS);
            get(admin.fenceProducers(List.of(id)).all());
            Check.saw("fenceProducers(" + id + ") done");
            Exception failed = null;
            try {
                p.send(new ProducerRecord<>(topic, bytes("after-fence"))).get(10,
                        TimeUnit.SECONDS);
                p.commitTransaction();
            } catch (Exception e) {
                failed = e;
            }
            Check.that(failed != null, "the fenced producer's send or commit failed", failed);
            Check.caused(failed, "the producer is fenced", ProducerFencedException.class,
                    InvalidProducerEpochException.class);
        }
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> reader = TransactionScenarios.committedReader(env)) {
            Env.readAll(reader, List.of(new TopicPartition(topic, 0)), 30)
                    .forEach(r -> seen.add(text(r.value())));
        }
        Check.equal(List.of(), seen, "read_committed records after the fence");
    }

    /**
     * Aborts a transaction at one partition with WriteTxnMarkers (abortTransaction), as an
     * operator does for a hanging transaction: the open transaction's records become
     * invisible to read_committed readers and the last stable offset moves past them.
     */
    private static void abortTransaction(Env env, Admin admin) throws Exception {
        String topic = env.name("hanging");
        env.createTopic(admin, topic, 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaProducer<byte[], byte[]> p = TransactionScenarios.transactional(env,
                env.name("hanging-id"));
        try {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, bytes("hanging"))).get(10, TimeUnit.SECONDS);
            List<ProducerState> states = get(admin.describeProducers(List.of(tp))
                    .partitionResult(tp)).activeProducers();
            Check.equal(1, states.size(), "producers of the hanging partition");
            ProducerState s = states.get(0);
            Check.equal(0L, s.currentTransactionStartOffset().orElse(-1),
                    "the open transaction's first offset");
            get(admin.abortTransaction(new AbortTransactionSpec(tp, s.producerId(),
                    (short) s.producerEpoch(), s.coordinatorEpoch().orElse(0))).all());
            Check.saw("abortTransaction(" + tp + ", producer " + s.producerId() + ") done");
            try (KafkaConsumer<byte[], byte[]> reader = TransactionScenarios.committedReader(env)) {
                Check.equal(2L, reader.endOffsets(List.of(tp)).get(tp),
                        "last stable offset after the abort marker");
                Check.equal(0, Env.readAll(reader, List.of(tp), 30).size(),
                        "read_committed records of the aborted transaction");
            }
            List<ProducerState> after = get(admin.describeProducers(List.of(tp))
                    .partitionResult(tp)).activeProducers();
            Check.equal(-1L, after.get(0).currentTransactionStartOffset().orElse(-1),
                    "open transaction after the abort");
        } finally {
            p.close(Duration.ofSeconds(5));
        }
    }

    /** removeMembersFromConsumerGroup takes a static member out at once (LeaveGroup). */
    @SuppressWarnings("deprecation")
    private static void removeStaticMember(Env env, Admin admin) throws Exception {
        String topic = env.name("static");
        String group = env.name("static-g");
        env.createTopic(admin, topic, 2, Map.of());
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "to-remove",
                ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 60_000))) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (c.assignment().isEmpty() && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(100));
            }
            Check.equal(2, c.assignment().size(), "the static member's partitions");
        }
        ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group));
        Check.equal(1, d.members().size(), "members after the static member closed (it stays)");
        Check.equal("to-remove", d.members().iterator().next().groupInstanceId().orElse(""),
                "its group.instance.id");
        get(admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(
                List.of(new MemberToRemove("to-remove")))).all());
        d = get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
        Check.equal(0, d.members().size(), "members after removeMembersFromConsumerGroup");
    }

    private static void quotas(Env env, Admin admin) throws Exception {
        String user = env.name("quota-user");
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1_048_576.0),
                new ClientQuotaAlteration.Op("request_percentage", 50.0))))).all());
        Map<ClientQuotaEntity, Map<String, Double>> described = get(admin.describeClientQuotas(
                ClientQuotaFilter.all()).entities());
        Check.equal(Map.of("producer_byte_rate", 1_048_576.0, "request_percentage", 50.0),
                described.get(entity), "describeClientQuotas of the user");
        get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("request_percentage", null))))).all());
        Check.equal(Map.of("producer_byte_rate", 1_048_576.0), get(admin.describeClientQuotas(
                ClientQuotaFilter.all()).entities()).get(entity),
                "quotas after removing request_percentage");
    }

    private static void scram(Env env, Admin admin) throws Exception {
        String user = env.name("scram-user");
        get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "secret"))).all());
        Map<String, UserScramCredentialsDescription> d = get(admin.describeUserScramCredentials(
                List.of(user)).all());
        Collection<ScramCredentialInfo> infos = d.get(user).credentialInfos();
        Check.equal(1, infos.size(), "SCRAM credentials of the user");
        ScramCredentialInfo info = infos.iterator().next();
        Check.equal(ScramMechanism.SCRAM_SHA_256, info.mechanism(), "its mechanism");
        Check.equal(8192, info.iterations(), "its iterations");
        Set<String> users = get(admin.describeUserScramCredentials().users()) == null ? Set.of()
                : Set.copyOf(get(admin.describeUserScramCredentials().users()));
        Check.that(users.contains(user), "describeUserScramCredentials() lists the user",
                users);
    }
}
