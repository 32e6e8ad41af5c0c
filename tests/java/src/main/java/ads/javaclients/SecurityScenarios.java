package ads.javaclients;

import static ads.javaclients.AdminScenarios.catching;
import static ads.javaclients.AdminScenarios.get;
import static ads.javaclients.ProducerScenarios.bytes;
import static ads.javaclients.ProducerScenarios.text;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The Admin client against a secured cluster: SCRAM users and ACLs managed by an admin
 * (PLAIN, a super user) and obeyed for a SCRAM user, on the cluster's SASL_PLAINTEXT
 * listener given as the bootstrap. Arguments: admin.user, admin.password.
 */
final class SecurityScenarios {
    private SecurityScenarios() {}

    private static final String PLAIN_MODULE =
            "org.apache.kafka.common.security.plain.PlainLoginModule";
    private static final String SCRAM_MODULE =
            "org.apache.kafka.common.security.scram.ScramLoginModule";
    // ACLs and credentials reach every broker through ZooKeeper a moment after the change.
    private static final int PROPAGATION_S = 20;

    static Map<String, Object> login(String module, String mechanism, String user,
            String password) {
        Map<String, Object> p = new HashMap<>();
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, mechanism);
        p.put(SaslConfigs.SASL_JAAS_CONFIG, module + " required username=\"" + user
                + "\" password=\"" + password + "\";");
        return p;
    }

    static void aclsAndScramUsers(Env env) throws Exception {
        String user = env.name("user");
        String password = "secret-" + user;
        String principal = "User:" + user;
        String topic = env.name("t");
        String group = env.name("g");
        Map<String, Object> asAdmin = login(PLAIN_MODULE, "PLAIN", env.arg("admin.user", ""),
                env.arg("admin.password", ""));
        Map<String, Object> asUser = login(SCRAM_MODULE, "SCRAM-SHA-256", user, password);
        try (Admin admin = env.admin(asAdmin)) {
            env.createTopic(admin, topic, 1, Map.of());

            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), password)))
                    .all());
            UserScramCredentialsDescription described =
                    get(admin.describeUserScramCredentials(List.of(user)).description(user));
            Check.equal(List.of(ScramMechanism.SCRAM_SHA_256 + "/8192"),
                    described.credentialInfos().stream()
                            .map(i -> i.mechanism() + "/" + i.iterations()).toList(),
                    "describeUserScramCredentials of the new user");

            // A client whose login fails gives up for good (3.x's Admin client), so the
            // user's clients start once every broker knows the new credential.
            for (String address : env.bootstrap.split(",")) {
                Env.waitFor(() -> loginError(env.admin(with(asUser, Map.of(
                        CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, address)))) == null,
                        "the new user's login accepted by " + address, PROPAGATION_S);
            }
            // Logged in, but allowed nothing yet.
            Throwable refused = firstSendError(env, asUser, topic, "before-acls");
            Check.caused(refused, "a produce without ACLs", TopicAuthorizationException.class);
            try (Admin userAdmin = env.admin(asUser)) {
                Check.caused(catching(() -> get(userAdmin.createAcls(List.of(binding(
                        ResourceType.TOPIC, topic, PatternType.LITERAL, principal,
                        AclOperation.READ))).all())), "createAcls by a user without ALTER on "
                        + "the cluster", ClusterAuthorizationException.class);
            }

            List<AclBinding> granted = List.of(
                    binding(ResourceType.TOPIC, topic, PatternType.LITERAL, principal,
                            AclOperation.WRITE),
                    binding(ResourceType.TOPIC, env.scenario + "-", PatternType.PREFIXED,
                            principal, AclOperation.READ),
                    binding(ResourceType.GROUP, group, PatternType.LITERAL, principal,
                            AclOperation.READ));
            get(admin.createAcls(granted).all());
            AclBindingFilter ofUser = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(principal, null, AclOperation.ANY,
                            AclPermissionType.ANY));
            Check.equal(names(granted), names(get(admin.describeAcls(ofUser).values())),
                    "describeAcls of the user");

            Env.waitFor(() -> firstSendError(env, asUser, topic, "granted") == null,
                    "a produce allowed by the WRITE ACL", PROPAGATION_S);
            try (KafkaConsumer<byte[], byte[]> consumer = env.consumer(with(asUser, Map.of(
                    ConsumerConfig.GROUP_ID_CONFIG, group)))) {
                TopicPartition tp = new TopicPartition(topic, 0);
                List<ConsumerRecord<byte[], byte[]>> read = Env.readAll(consumer, List.of(tp), 30);
                Check.equal("granted", text(read.get(read.size() - 1).value()),
                        "the record read back under the prefixed READ ACL");
                consumer.commitSync(Map.of(tp, new OffsetAndMetadata(read.size())));
                Check.saw("offsets committed under the group's READ ACL");
            }

            Collection<AclBinding> deleted = get(admin.deleteAcls(List.of(
                    granted.get(0).toFilter())).all());
            Check.equal(names(List.of(granted.get(0))), names(deleted),
                    "deleteAcls of the WRITE ACL");
            Env.waitFor(() -> causedBy(firstSendError(env, asUser, topic, "after-delete"),
                    TopicAuthorizationException.class),
                    "a produce refused once the WRITE ACL is gone", PROPAGATION_S);

            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user,
                    ScramMechanism.SCRAM_SHA_256))).all());
            Check.caused(catching(() -> get(admin.describeUserScramCredentials(List.of(user))
                    .description(user))), "describeUserScramCredentials of a deleted user",
                    ResourceNotFoundException.class);
            Env.waitFor(() -> causedBy(loginError(env.admin(asUser)),
                    AuthenticationException.class), "the deleted user's login refused",
                    PROPAGATION_S);
            get(admin.deleteAcls(List.of(ofUser)).all());
        }
    }

    private static AclBinding binding(ResourceType type, String name, PatternType pattern,
            String principal, AclOperation operation) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
                new AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW));
    }

    private static Set<String> names(Collection<AclBinding> bindings) {
        return bindings.stream().map(AclBinding::toString)
                .collect(Collectors.toCollection(TreeSet::new));
    }

    private static Map<String, Object> with(Map<String, Object> a, Map<String, Object> b) {
        Map<String, Object> out = new HashMap<>(a);
        out.putAll(b);
        return out;
    }

    /** Sends one record with a new producer; the error it failed with, or null. */
    private static Throwable firstSendError(Env env, Map<String, Object> login, String topic,
            String value) {
        try (KafkaProducer<byte[], byte[]> p = env.producer(with(login, Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false,
                ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000,
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 10_000,
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000)))) {
            p.send(new ProducerRecord<>(topic, bytes(value))).get(15, TimeUnit.SECONDS);
            return null;
        } catch (Exception e) {
            Check.saw("send of " + value + ": " + e);
            return e.getCause() != null ? e.getCause() : e;
        }
    }

    /** What a describeCluster with the (new) client failed with, or null; closes it. */
    private static Throwable loginError(Admin client) {
        try (Admin a = client) {
            get(a.describeCluster().nodes());
            return null;
        } catch (Exception e) {
            Check.saw("describeCluster: " + e);
            return e;
        }
    }

    private static boolean causedBy(Throwable error, Class<?> cls) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (cls.isInstance(t)) {
                return true;
            }
        }
        return false;
    }
}
