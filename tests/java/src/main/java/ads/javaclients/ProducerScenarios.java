package ads.javaclients;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** Idempotent acks=all producers: every codec, headers, a large record; a leader killed. */
final class ProducerScenarios {
    private ProducerScenarios() {}

    static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");
    static final int PARTITIONS = 3;
    static final int PER_CODEC = 60;
    static final int MAX_REQUEST_SIZE = 1_048_576;
    // A large value of random (incompressible) bytes, with room for the batch's overhead.
    static final int LARGE = MAX_REQUEST_SIZE - 8_192;

    record Sent(ProducerRecord<byte[], byte[]> record, RecordMetadata meta) {}

    static void codecs(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, PARTITIONS, Map.of());
        List<Sent> sent = new ArrayList<>();
        Random random = new Random(42);
        for (String codec : CODECS) {
            List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
            for (int i = 0; i < PER_CODEC; i++) {
                byte[] key = i % 7 == 0 ? null : bytes(codec + "-key-" + i);
                byte[] value = i % 11 == 5 ? null
                        : bytes((codec + "-value-" + i + "|").repeat(1 + i % 9));
                List<Header> headers = List.of(
                        new RecordHeader("codec", bytes(codec)),
                        new RecordHeader("n", bytes(Integer.toString(i))),
                        new RecordHeader("empty", i % 2 == 0 ? null : new byte[0]));
                records.add(new ProducerRecord<>(topic, i % PARTITIONS,
                        1_700_000_000_000L + i, key, value, headers));
            }
            byte[] large = new byte[LARGE];
            random.nextBytes(large);
            records.add(new ProducerRecord<>(topic, 0, 1_700_000_001_000L,
                    bytes(codec + "-large"), large, List.of(new RecordHeader("large", Arrays.copyOf(large, 16)))));
            sent.addAll(produce(env, codec, records));
        }
        Check.equal(CODECS.size() * (PER_CODEC + 1), sent.size(), "records acknowledged");
        readBackExactly(env, topic, sent);
    }

    private static List<Sent> produce(Env env, String codec,
            List<ProducerRecord<byte[], byte[]>> records) throws Exception {
        Map<String, Object> config = Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.LINGER_MS_CONFIG, 5,
                ProducerConfig.MAX_REQUEST_SIZE_CONFIG, MAX_REQUEST_SIZE);
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = env.producer(config)) {
            for (ProducerRecord<byte[], byte[]> r : records) {
                futures.add(producer.send(r));
            }
            producer.flush();
        }
        List<Sent> out = new ArrayList<>();
        for (int i = 0; i < records.size(); i++) {
            out.add(new Sent(records.get(i), futures.get(i).get(30, TimeUnit.SECONDS)));
        }
        Check.saw(codec + ": " + records.size() + " records acknowledged, last at "
                + out.get(out.size() - 1).meta());
        return out;
    }

    private static void readBackExactly(Env env, String topic, List<Sent> sent) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        Map<String, ConsumerRecord<byte[], byte[]>> read = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = env.consumer(Map.of())) {
            for (ConsumerRecord<byte[], byte[]> r : Env.readAll(consumer, tps, 60)) {
                read.put(r.partition() + "@" + r.offset(), r);
            }
        }
        Check.equal(sent.size(), read.size(), "records read back");
        Map<Integer, Set<Long>> offsets = new HashMap<>();
        for (Sent s : sent) {
            String at = s.meta().partition() + "@" + s.meta().offset();
            ConsumerRecord<byte[], byte[]> r = read.get(at);
            if (r == null) {
                throw new Check.Failed("acknowledged record " + at + " not read back");
            }
            ProducerRecord<byte[], byte[]> w = s.record();
            if (!Arrays.equals(w.key(), r.key()) || !Arrays.equals(w.value(), r.value())
                    || !w.timestamp().equals(r.timestamp())
                    || !sameHeaders(w.headers().toArray(), r.headers().toArray())) {
                throw new Check.Failed("record " + at + " differs: wrote key "
                        + text(w.key()) + ", read key " + text(r.key()));
            }
            offsets.computeIfAbsent(s.meta().partition(), k -> new TreeSet<>())
                    .add(s.meta().offset());
        }
        for (Map.Entry<Integer, Set<Long>> e : offsets.entrySet()) {
            Set<Long> expected = new TreeSet<>();
            for (long o = 0; o < e.getValue().size(); o++) {
                expected.add(o);
            }
            Check.that(expected.equals(e.getValue()), "offsets of partition " + e.getKey()
                    + " are contiguous from 0", "0.." + (e.getValue().size() - 1));
        }
        Check.saw("every key, value, timestamp and header read back as written");
    }

    private static boolean sameHeaders(Header[] a, Header[] b) {
        if (a.length != b.length) {
            return false;
        }
        for (int i = 0; i < a.length; i++) {
            if (!a[i].key().equals(b[i].key()) || !Arrays.equals(a[i].value(), b[i].value())) {
                return false;
            }
        }
        return true;
    }

    /**
     * Produces while the test kills the partition's leader: prints "LEADER id" once records
     * are flowing, keeps producing until another broker leads and more records were
     * acknowledged, then reads the partition back: each acknowledged record exactly once.
     */
    static void failover(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 1, Map.of("min.insync.replicas", "2"));
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<Long, Long> acked = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<Exception> failed = new ConcurrentLinkedQueue<>();
        long sentCount = 0;
        try (Admin admin = env.admin();
                KafkaProducer<byte[], byte[]> producer = env.producer(Map.of(
                        ProducerConfig.LINGER_MS_CONFIG, 2,
                        ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000,
                        ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000))) {
            int first = Env.partition(admin, topic, 0).leader().id();
            long announcedAt = -1;
            long moved = -1;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(70);
            long nextLook = 0;
            while (true) {
                for (int i = 0; i < 10; i++, sentCount++) {
                    long seq = sentCount;
                    producer.send(new ProducerRecord<>(topic, 0, null, bytes("seq-" + seq)),
                            (meta, error) -> {
                                if (error != null) {
                                    failed.add(error);
                                } else {
                                    acked.put(seq, meta.offset());
                                }
                            });
                }
                TimeUnit.MILLISECONDS.sleep(10);
                if (announcedAt < 0 && acked.size() >= 300) {
                    announcedAt = acked.size();
                    System.out.println("LEADER " + first);
                    System.out.flush();
                }
                if (announcedAt >= 0 && moved < 0 && System.nanoTime() > nextLook) {
                    nextLook = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                    var leader = Env.partition(admin, topic, 0).leader();
                    if (leader != null && leader.id() != first) {
                        moved = acked.size();
                        Check.saw("leader moved from " + first + " to " + leader.id()
                                + " with " + moved + " records acknowledged");
                    }
                }
                if (moved >= 0 && acked.size() >= moved + 300) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new Check.Failed("leader of " + tp + " did not move from " + first
                            + " (or produce stalled): " + acked.size() + " acknowledged");
                }
            }
            producer.flush();
        }
        Check.equal(0, failed.size(), "sends that failed"
                + (failed.isEmpty() ? "" : " (first: " + failed.peek() + ")"));
        Check.equal(sentCount, (long) acked.size(), "records acknowledged");
        Map<String, List<Long>> seen = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = env.consumer(Map.of())) {
            for (ConsumerRecord<byte[], byte[]> r : Env.readAll(consumer, List.of(tp), 60)) {
                seen.computeIfAbsent(text(r.value()), k -> new ArrayList<>()).add(r.offset());
            }
        }
        for (Map.Entry<Long, Long> e : acked.entrySet()) {
            List<Long> at = seen.get("seq-" + e.getKey());
            if (at == null || !at.equals(List.of(e.getValue()))) {
                throw new Check.Failed("acknowledged seq-" + e.getKey() + " at offset "
                        + e.getValue() + " read back at " + at);
            }
        }
        Check.equal(acked.size(), seen.size(), "distinct records in the partition");
        Check.saw("every acknowledged record read back once, at its acknowledged offset");
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }
}
