package ads.javaclients;

import static ads.javaclients.ProducerScenarios.bytes;
import static ads.javaclients.ProducerScenarios.text;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** A consumer's positions: offsetsForTimes, seek, committed(), pause/resume, and the last
 * stable offset a read_committed consumer stops at while a transaction is open. */
final class ConsumerScenarios {
    private ConsumerScenarios() {}

    static final long BASE = 1_700_000_000_000L;

    static void positions(Env env) throws Exception {
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 2, Map.of());
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (KafkaProducer<byte[], byte[]> producer = env.producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, BASE + 1000L * i, null,
                        bytes("r" + i)));
            }
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, 1, null, bytes("q" + i)));
            }
            producer.flush();
        }
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of())) {
            Check.equal(0L, c.beginningOffsets(List.of(p0)).get(p0), "beginning offset");
            Check.equal(10L, c.endOffsets(List.of(p0)).get(p0), "end offset");
            Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(Map.of(p0,
                    BASE + 2500));
            Check.equal(3L, found.get(p0).offset(), "offsetsForTimes(+2.5 s) offset");
            Check.equal(BASE + 3000, found.get(p0).timestamp(), "offsetsForTimes timestamp");
            Check.equal(null, c.offsetsForTimes(Map.of(p0, BASE + 60_000)).get(p0),
                    "offsetsForTimes past the last record");
            c.assign(List.of(p0));
            c.seek(p0, 5);
            List<ConsumerRecord<byte[], byte[]>> got = Env.pollCount(c, 1, 20);
            Check.equal(5L, got.get(0).offset(), "first offset after seek(5)");
            Check.equal("r5", text(got.get(0).value()), "value after seek(5)");
            Check.equal(BASE + 5000, got.get(0).timestamp(), "timestamp after seek(5)");
        }
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group))) {
            c.assign(List.of(p0));
            c.commitSync(Map.of(p0, new OffsetAndMetadata(7, "meta-7")));
            OffsetAndMetadata committed = c.committed(Set.of(p0)).get(p0);
            Check.equal(7L, committed.offset(), "committed() offset");
            Check.equal("meta-7", committed.metadata(), "committed() metadata");
        }
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group))) {
            c.assign(List.of(p0));
            List<ConsumerRecord<byte[], byte[]>> got = Env.pollCount(c, 3, 20);
            Check.equal(7L, got.get(0).offset(), "a new consumer of the group starts at");
        }
        pauseResume(env, p0, p1);
        lastStableOffset(env, p1);
        outOfRange(env, p0);
    }

    /**
     * Below the log start offset (after deleteRecords) a fetch is out of range: with
     * auto.offset.reset=none poll throws OffsetOutOfRangeException, with earliest the
     * consumer starts again at the log start offset.
     */
    private static void outOfRange(Env env, TopicPartition p0) throws Exception {
        try (Admin admin = env.admin()) {
            Check.equal(3L, admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(3)))
                    .lowWatermarks().get(p0).get(30, TimeUnit.SECONDS).lowWatermark(),
                    "log start offset after deleteRecords");
        }
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of(
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
            c.assign(List.of(p0));
            c.seek(p0, 1);
            Exception thrown = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (thrown == null && System.nanoTime() < deadline) {
                try {
                    Check.equal(0, c.poll(Duration.ofMillis(200)).count(),
                            "records fetched below the log start offset");
                } catch (OffsetOutOfRangeException e) {
                    thrown = e;
                }
            }
            Check.that(thrown != null, "poll below the log start offset threw "
                    + "OffsetOutOfRangeException", thrown);
        }
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of())) {
            c.assign(List.of(p0));
            c.seek(p0, 1);
            List<ConsumerRecord<byte[], byte[]>> got = Env.pollCount(c, 1, 20);
            Check.equal(3L, got.get(0).offset(), "first offset after the reset to earliest");
        }
    }

    private static void pauseResume(Env env, TopicPartition p0, TopicPartition p1) {
        try (KafkaConsumer<byte[], byte[]> c = env.consumer(Map.of())) {
            c.assign(List.of(p0, p1));
            c.seekToBeginning(List.of(p0, p1));
            c.pause(List.of(p1));
            Check.equal(Set.of(p1), c.paused(), "paused()");
            List<ConsumerRecord<byte[], byte[]>> got = Env.pollCount(c, 10, 20);
            for (int i = 0; i < 5; i++) {
                c.poll(Duration.ofMillis(100)).forEach(got::add);
            }
            Check.equal(10, got.size(), "records while partition 1 is paused");
            Check.that(got.stream().allMatch(r -> r.partition() == 0),
                    "only partition 0 read while 1 is paused", got.size());
            c.resume(List.of(p1));
            got = Env.pollCount(c, 5, 20);
            Check.equal(5, got.size(), "records after resume");
            Check.that(got.stream().allMatch(r -> r.partition() == 1),
                    "the resumed partition's records", got.get(0).partition());
        }
    }

    /**
     * An open transaction holds read_committed consumers at its first offset (the last
     * stable offset), even for records written after it outside the transaction.
     */
    private static void lastStableOffset(Env env, TopicPartition p1) throws Exception {
        try (KafkaProducer<byte[], byte[]> txn = TransactionScenarios.transactional(env,
                env.name("txn"));
                KafkaProducer<byte[], byte[]> plain = env.producer(Map.of());
                KafkaConsumer<byte[], byte[]> committed = TransactionScenarios.committedReader(env);
                KafkaConsumer<byte[], byte[]> uncommitted = env.consumer(Map.of())) {
            txn.initTransactions();
            txn.beginTransaction();
            for (int i = 0; i < 3; i++) {
                txn.send(new ProducerRecord<>(p1.topic(), 1, null, bytes("open-" + i)));
            }
            txn.flush();
            plain.send(new ProducerRecord<>(p1.topic(), 1, null, bytes("behind-0"))).get(10,
                    TimeUnit.SECONDS);
            Check.equal(5L, committed.endOffsets(List.of(p1)).get(p1),
                    "read_committed end offset (the last stable offset)");
            Check.equal(9L, uncommitted.endOffsets(List.of(p1)).get(p1),
                    "read_uncommitted end offset (the high watermark)");
            committed.assign(List.of(p1));
            committed.seek(p1, 5);
            List<ConsumerRecord<byte[], byte[]>> before = Env.pollCount(committed, 1, 3);
            Check.equal(0, before.size(), "records read_committed sees while the txn is open");
            txn.commitTransaction();
            List<String> after = new ArrayList<>();
            Env.pollCount(committed, 4, 20).forEach(r -> after.add(text(r.value())));
            Check.equal(List.of("open-0", "open-1", "open-2", "behind-0"), after,
                    "records read_committed sees after the commit");
        }
    }
}
