package ads.javaclients;

import static ads.javaclients.ProducerScenarios.bytes;
import static ads.javaclients.ProducerScenarios.text;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

/** Transactional producers: consume-transform-produce, aborts, and a fenced zombie. */
final class TransactionScenarios {
    private TransactionScenarios() {}

    static final int INPUT = 40;

    static KafkaProducer<byte[], byte[]> transactional(Env env, String id) {
        return env.producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 30_000));
    }

    static KafkaConsumer<byte[], byte[]> committedReader(Env env) {
        return env.consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
    }

    /**
     * Copies an input topic to an output topic in transactions that also commit the input
     * offsets (sendOffsetsToTransaction), aborts one transaction of extra records, and
     * checks what read_committed and read_uncommitted readers see and the group's offsets.
     */
    static void consumeTransformProduce(Env env) throws Exception {
        String input = env.name("in");
        String output = env.name("out");
        String group = env.name("g");
        env.createTopic(input, 2, Map.of());
        env.createTopic(output, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> plain = env.producer(Map.of())) {
            for (int i = 0; i < INPUT; i++) {
                plain.send(new ProducerRecord<>(input, i % 2, bytes("k" + i), bytes("v" + i)));
            }
            plain.flush();
        }
        int copied = 0;
        int transactions = 0;
        try (KafkaProducer<byte[], byte[]> producer = transactional(env, env.name("copier"));
                KafkaConsumer<byte[], byte[]> consumer = env.consumer(Map.of(
                        ConsumerConfig.GROUP_ID_CONFIG, group,
                        ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                        ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 7))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (copied < INPUT && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(),
                            bytes(text(r.value()).toUpperCase())));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                copied += records.count();
                transactions++;
            }
            Check.equal(INPUT, copied, "input records copied");
            Check.that(transactions > 1, "copied in several transactions", transactions);

            producer.beginTransaction();
            List<Future<RecordMetadata>> aborted = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                aborted.add(producer.send(new ProducerRecord<>(output, bytes("aborted-" + i))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : aborted) {
                f.get(10, TimeUnit.SECONDS);
            }
            producer.abortTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(output, bytes("after-" + i)));
            }
            producer.commitTransaction();
        }
        TopicPartition out = new TopicPartition(output, 0);
        List<String> committed = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> reader = committedReader(env)) {
            for (ConsumerRecord<byte[], byte[]> r : Env.readAll(reader, List.of(out), 30)) {
                committed.add(text(r.value()));
            }
        }
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < INPUT; i++) {
            expected.add("V" + i);
        }
        List<String> copiedValues = new ArrayList<>(committed.subList(0,
                Math.min(INPUT, committed.size())));
        copiedValues.sort((a, b) -> Integer.compare(Integer.parseInt(a.substring(1)),
                Integer.parseInt(b.substring(1))));
        Check.equal(INPUT + 3, committed.size(), "read_committed records of the output");
        Check.equal(expected, copiedValues, "copied values (transformed, each once)");
        Check.equal(List.of("after-0", "after-1", "after-2"), committed.subList(INPUT, INPUT + 3),
                "records of the transaction after the aborted one");
        try (KafkaConsumer<byte[], byte[]> reader = env.consumer(Map.of())) {
            long abortedSeen = Env.readAll(reader, List.of(out), 30).stream()
                    .filter(r -> text(r.value()).startsWith("aborted-")).count();
            Check.equal(5L, abortedSeen, "aborted records a read_uncommitted reader sees");
        }
        try (KafkaConsumer<byte[], byte[]> check = env.consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group))) {
            Map<TopicPartition, OffsetAndMetadata> offsets = check.committed(Set.of(
                    new TopicPartition(input, 0), new TopicPartition(input, 1)));
            Check.equal(INPUT / 2L, offsets.get(new TopicPartition(input, 0)).offset(),
                    "group offset of input partition 0 (committed in the transactions)");
            Check.equal(INPUT / 2L, offsets.get(new TopicPartition(input, 1)).offset(),
                    "group offset of input partition 1");
        }
    }

    /**
     * A second producer with the same transactional.id fences the first: the first's open
     * transaction is aborted, its next send or commit fails with ProducerFencedException (or
     * InvalidProducerEpochException), and only the second's records are committed.
     */
    static void fencing(Env env) throws Exception {
        String topic = env.name("t");
        String id = env.name("id");
        env.createTopic(topic, 1, Map.of());
        KafkaProducer<byte[], byte[]> zombie = transactional(env, id);
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, bytes("zombie-open"))).get(10,
                    TimeUnit.SECONDS);
            try (KafkaProducer<byte[], byte[]> successor = transactional(env, id)) {
                successor.initTransactions();
                Check.saw("successor initialized; the zombie's transaction is aborted");
                Exception fenced = null;
                try {
                    zombie.send(new ProducerRecord<>(topic, bytes("zombie-late")))
                            .get(10, TimeUnit.SECONDS);
                    zombie.commitTransaction();
                } catch (Exception e) {
                    fenced = e;
                }
                Check.that(fenced != null, "the zombie's send or commit failed", fenced);
                Check.caused(fenced, "the zombie is fenced", ProducerFencedException.class,
                        InvalidProducerEpochException.class);
                successor.beginTransaction();
                successor.send(new ProducerRecord<>(topic, bytes("successor")));
                successor.commitTransaction();
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> reader = committedReader(env)) {
            Env.readAll(reader, List.of(new TopicPartition(topic, 0)), 30)
                    .forEach(r -> seen.add(text(r.value())));
        }
        Check.equal(List.of("successor"), seen, "read_committed records");
        staleGeneration(env);
    }

    /**
     * Offsets sent to a transaction with the group metadata of an older generation (KIP-447):
     * the commit fails with CommitFailedException and the group's offsets stay unset.
     */
    private static void staleGeneration(Env env) throws Exception {
        String topic = env.name("in");
        String group = env.name("g");
        env.createTopic(topic, GroupScenarios.PARTITIONS, Map.of());
        Map<String, Object> config = GroupScenarios.groupConfig(group,
                GroupScenarios.protocolConfig(false, 10_000));
        GroupScenarios.Member one = new GroupScenarios.Member(env, "one", topic, config);
        GroupScenarios.Member two = null;
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = transactional(env, env.name("eos"))) {
            producer.initTransactions();
            GroupScenarios.pollUntil(List.of(one), () -> !one.owned().isEmpty(),
                    "the first member is assigned", 30);
            ConsumerGroupMetadata stale = one.consumer.groupMetadata();
            GroupScenarios.Member second = new GroupScenarios.Member(env, "two", topic, config);
            two = second;
            GroupScenarios.pollUntil(List.of(one, second), () -> GroupScenarios.split(one,
                    second), "a rebalance to two members", 30);
            Check.that(one.generation() > stale.generationId(), "the generation moved on",
                    stale.generationId() + " -> " + one.generation());
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, bytes("eos")));
            Exception failed = null;
            try {
                producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(1)), stale);
                producer.commitTransaction();
            } catch (Exception e) {
                failed = e;
            }
            Check.that(failed != null, "the stale generation's offset commit failed", failed);
            Check.caused(failed, "it is fenced", CommitFailedException.class);
        } finally {
            one.consumer.close(Duration.ofSeconds(10));
            if (two != null) {
                two.consumer.close(Duration.ofSeconds(10));
            }
        }
        try (KafkaConsumer<byte[], byte[]> check = env.consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group))) {
            Check.equal(null, check.committed(Set.of(tp)).get(tp),
                    "the group's offset of partition 0");
        }
    }
}
