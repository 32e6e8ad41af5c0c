package ads.javaclients;

import static ads.javaclients.ProducerScenarios.bytes;
import static ads.javaclients.ProducerScenarios.text;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Share groups (KIP-932) with Kafka's own {@code KafkaShareConsumer}: two consumers of one
 * group read a 2-partition topic together with explicit acknowledgement; a released record
 * comes back with delivery count 2, a rejected one never comes back, every other record is
 * accepted exactly once. The cluster runs with {@code group.share.enable=true} and
 * {@code group.share.auto.offset.reset=earliest}. Then the Admin client describes the group
 * and its share-partitions' start offsets, resets them to 0 (AlterShareGroupOffsets: a new
 * consumer gets every record again) and deletes them (DeleteShareGroupOffsets). Compiled for
 * kafka-clients 4.x only (pom.xml).
 */
final class ShareScenarios {
    private ShareScenarios() {}

    static final int RECORDS = 40;
    static final String RELEASED = "r7";
    static final String REJECTED = "r13";

    static KafkaShareConsumer<byte[], byte[]> shareConsumer(Env env, String group) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, env.bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("share.acknowledgement.mode", "explicit");
        return new KafkaShareConsumer<>(p, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
    }

    static void shareGroup(Env env) throws Exception {
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 2, Map.of());
        try (KafkaProducer<byte[], byte[]> producer = env.producer(Map.of())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, null, bytes("r" + i)));
            }
            producer.flush();
        }
        // Accepted records and the delivery count each was accepted at; deliveries per value.
        Map<String, Short> accepted = new TreeMap<>();
        Map<String, Integer> deliveries = new TreeMap<>();
        Map<String, Integer> perConsumer = new TreeMap<>();
        List<KafkaShareConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        try {
            consumers.add(shareConsumer(env, group));
            consumers.add(shareConsumer(env, group));
            for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
                c.subscribe(List.of(topic));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (accepted.size() < RECORDS - 1 && System.nanoTime() < deadline) {
                for (int n = 0; n < consumers.size(); n++) {
                    KafkaShareConsumer<byte[], byte[]> c = consumers.get(n);
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                        String value = text(r.value());
                        short count = r.deliveryCount().orElse((short) -1);
                        deliveries.merge(value, 1, Integer::sum);
                        perConsumer.merge("consumer-" + n, 1, Integer::sum);
                        AcknowledgeType type = AcknowledgeType.ACCEPT;
                        if (value.equals(REJECTED)) {
                            type = AcknowledgeType.REJECT;
                        } else if (value.equals(RELEASED) && count == 1) {
                            type = AcknowledgeType.RELEASE;
                        } else {
                            Check.that(accepted.put(value, count) == null,
                                    "accepted once: " + value, count);
                        }
                        c.acknowledge(r, type);
                    }
                    c.commitSync(Duration.ofSeconds(15));
                }
            }
            // A little longer: nothing rejected or accepted may come back.
            long quiet = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            int late = 0;
            while (System.nanoTime() < quiet) {
                for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        late++;
                        Check.saw("delivered again: " + text(r.value()));
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync(Duration.ofSeconds(15));
                }
            }
            Check.saw("records per consumer " + perConsumer);
            Check.equal(RECORDS - 1, accepted.size(), "records accepted");
            Check.that(!accepted.containsKey(REJECTED), "the rejected record is not accepted",
                    accepted.keySet());
            Check.equal(Optional.of((short) 2), Optional.ofNullable(accepted.get(RELEASED)),
                    "delivery count of the released record when accepted");
            Check.equal(2, deliveries.get(RELEASED), "deliveries of the released record");
            Check.equal(1, deliveries.get(REJECTED), "deliveries of the rejected record");
            Check.equal(0, late, "records delivered after all were acknowledged");
            // The Admin client's view (DescribeShareGroups, DescribeShareGroupOffsets): every
            // record of both partitions is done, so each starts past its last record.
            try (Admin admin = env.admin()) {
                ShareGroupDescription d = admin.describeShareGroups(List.of(group))
                        .describedGroups().get(group).get(30, TimeUnit.SECONDS);
                Check.equal(2, d.members().size(), "members described");
                Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                        .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
                for (int p = 0; p < 2; p++) {
                    SharePartitionOffsetInfo info = offsets.get(new TopicPartition(topic, p));
                    Check.equal(RECORDS / 2L, info.startOffset(), "start offset of partition " + p);
                    Check.equal(Optional.of(0L), info.lag(), "lag of partition " + p);
                }
            }
        } finally {
            for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
                c.close(Duration.ofSeconds(10));
            }
        }
        resetAndDelete(env, topic, group);
    }

    /**
     * Version 2 of ShareFetch as the 4.x client uses it: two consumers with
     * {@code share.acquire.mode=record_limit} and {@code max.poll.records=3} read a
     * 4-partition topic written in batches of several records; no poll returns more than 3
     * records, though that splits batches, and every record is accepted once. The simple
     * assignor gives each of the two members two of the four partitions (Admin
     * describeShareGroups).
     */
    static void shareRecordLimit(Env env) throws Exception {
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 4, Map.of());
        try (KafkaProducer<byte[], byte[]> producer = env.producer(Map.of("linger.ms", 200))) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, i % 4, null, bytes("r" + i)));
            }
            producer.flush();
        }
        Map<String, Integer> accepted = new TreeMap<>();
        int largestPoll = 0;
        List<KafkaShareConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        try {
            for (int n = 0; n < 2; n++) {
                Map<String, Object> p = new HashMap<>();
                p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, env.bootstrap);
                p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                p.put("share.acknowledgement.mode", "explicit");
                p.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
                p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 3);
                KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p,
                        new ByteArrayDeserializer(), new ByteArrayDeserializer());
                c.subscribe(List.of(topic));
                consumers.add(c);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (accepted.size() < RECORDS && System.nanoTime() < deadline) {
                for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
                    int polled = 0;
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                        polled++;
                        accepted.merge(text(r.value()), 1, Integer::sum);
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    largestPoll = Math.max(largestPoll, polled);
                    c.commitSync(Duration.ofSeconds(15));
                }
            }
            Check.equal(RECORDS, accepted.size(), "records accepted");
            Check.that(accepted.values().stream().allMatch(n -> n == 1),
                    "every record delivered once", accepted);
            Check.that(largestPoll <= 3, "no poll returns more than max.poll.records",
                    largestPoll);
            try (Admin admin = env.admin()) {
                ShareGroupDescription d = admin.describeShareGroups(List.of(group))
                        .describedGroups().get(group).get(30, TimeUnit.SECONDS);
                Check.equal(2, d.members().size(), "members described");
                Set<TopicPartition> all = new java.util.HashSet<>();
                for (ShareMemberDescription m : d.members()) {
                    Set<TopicPartition> mine = m.assignment().topicPartitions();
                    Check.saw("member " + m.consumerId() + " assigned " + mine);
                    Check.equal(2, mine.size(), "partitions assigned to one member");
                    all.addAll(mine);
                }
                Check.equal(4, all.size(), "partitions assigned to the two members together");
            }
        } finally {
            for (KafkaShareConsumer<byte[], byte[]> c : consumers) {
                c.close(Duration.ofSeconds(10));
            }
        }
    }

    /**
     * The group has no members now: its offsets are altered back to 0 (every record is
     * delivered again, with delivery count 1), then deleted (no share-partition left).
     */
    static void resetAndDelete(Env env, String topic, String group) throws Exception {
        try (Admin admin = env.admin()) {
            Map<TopicPartition, Long> zero = Map.of(
                    new TopicPartition(topic, 0), 0L, new TopicPartition(topic, 1), 0L);
            admin.alterShareGroupOffsets(group, zero).all().get(30, TimeUnit.SECONDS);
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
            for (int p = 0; p < 2; p++) {
                SharePartitionOffsetInfo info = offsets.get(new TopicPartition(topic, p));
                Check.equal(0L, info.startOffset(), "start offset after the reset, partition " + p);
            }
            Map<String, Short> again = new TreeMap<>();
            try (KafkaShareConsumer<byte[], byte[]> c = shareConsumer(env, group)) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (again.size() < RECORDS && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                        again.put(text(r.value()), r.deliveryCount().orElse((short) -1));
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync(Duration.ofSeconds(15));
                }
            }
            Check.equal(RECORDS, again.size(), "records delivered again after the reset");
            Check.that(again.values().stream().allMatch(n -> n == 1),
                    "delivery count 1 after the reset", again.values());
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get(30, TimeUnit.SECONDS);
            Map<TopicPartition, SharePartitionOffsetInfo> left = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
            Check.equal(Map.of(), left, "share-partitions after deleting the offsets");
        }
    }
}
