package ads.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** What every scenario needs: the bootstrap servers, its arguments, clients and topics. */
final class Env {
    static final int REPLICATION = 3;

    final String bootstrap;
    final String scenario;
    private final Map<String, String> args = new HashMap<>();

    Env(String[] argv) {
        scenario = argv[0];
        bootstrap = argv[1];
        for (int i = 2; i < argv.length; i++) {
            String[] kv = argv[i].split("=", 2);
            args.put(kv[0], kv.length > 1 ? kv[1] : "");
        }
    }

    /** The version of kafka-clients on the classpath, from the properties file it carries. */
    static String clientVersion() {
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        } catch (java.io.IOException | NullPointerException e) {
            return "unknown";
        }
    }

    String arg(String key, String fallback) {
        return args.getOrDefault(key, fallback);
    }

    int intArg(String key, int fallback) {
        return Integer.parseInt(arg(key, Integer.toString(fallback)));
    }

    /**
     * A name unique to this scenario and client version, so both versions share a cluster
     * (and to the argument run=N, for running a scenario again on the same cluster).
     */
    String name(String what) {
        String run = arg("run", "");
        return scenario + "-" + what + "-" + clientVersion().replace('.', '-')
                + (run.isEmpty() ? "" : "-" + run);
    }

    Admin admin() {
        return admin(Map.of());
    }

    /** An Admin client with `extra` properties (a secured listener's login). */
    Admin admin(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.putAll(extra);
        return Admin.create(p);
    }

    KafkaProducer<byte[], byte[]> producer(Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        p.putAll(extra);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.putAll(extra);
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** Creates the topic (replication factor 3) and waits until every partition has a leader. */
    void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs)
            throws Exception {
        NewTopic t = new NewTopic(topic, partitions, (short) REPLICATION).configs(configs);
        admin.createTopics(List.of(t)).all().get(30, TimeUnit.SECONDS);
        waitFor(() -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(10, TimeUnit.SECONDS).get(topic);
                return d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null
                                && p.isr().size() == REPLICATION);
            } catch (Exception e) {
                return false;
            }
        }, "topic " + topic + " has leaders and a full ISR", 30);
    }

    void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin admin = admin()) {
            createTopic(admin, topic, partitions, configs);
        }
    }

    static TopicPartitionInfo partition(Admin admin, String topic, int partition)
            throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS)
                .get(topic).partitions().get(partition);
    }

    static void waitFor(BooleanSupplier check, String what, int seconds)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (check.getAsBoolean()) {
                return;
            }
            TimeUnit.MILLISECONDS.sleep(200);
        }
        throw new Check.Failed("timed out after " + seconds + " s waiting for: " + what);
    }

    /** Polls until `count` records arrived or the time is up; returns what arrived. */
    static List<ConsumerRecord<byte[], byte[]>> pollCount(
            KafkaConsumer<byte[], byte[]> consumer, int count, int seconds) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (out.size() < count && System.nanoTime() < deadline) {
            consumer.poll(Duration.ofMillis(200)).forEach(out::add);
        }
        return out;
    }

    /** Reads a partition from its beginning up to its end offset (under the isolation set). */
    static List<ConsumerRecord<byte[], byte[]>> readAll(
            KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> partitions,
            int seconds) {
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            boolean done = true;
            for (TopicPartition tp : partitions) {
                done &= consumer.position(tp) >= end.get(tp);
            }
            if (done) {
                return out;
            }
            consumer.poll(Duration.ofMillis(200)).forEach(out::add);
        }
        throw new Check.Failed("read of " + partitions + " did not reach " + end + " within "
                + seconds + " s; got " + out.size() + " records");
    }
}
