package ads.javaclients;

import static ads.javaclients.ProducerScenarios.bytes;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** Consumer groups of two members: eager, cooperative and KIP-848 rebalances, static
 * membership, and a member whose JVM is killed. Both members are polled from one thread. */
final class GroupScenarios {
    private GroupScenarios() {}

    static final int PARTITIONS = 4;

    /** A subscribed consumer and the rebalance callbacks it received. */
    static final class Member implements ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<String> events = new ArrayList<>();
        final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();

        Member(Env env, String name, String topic, Map<String, Object> config) {
            this.name = name;
            this.consumer = env.consumer(config);
            if (topic != null) {
                consumer.subscribe(List.of(topic), this);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            events.add("revoked " + numbers(partitions));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            events.add("assigned " + numbers(partitions));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            events.add("lost " + numbers(partitions));
        }

        void poll() {
            consumer.poll(Duration.ofMillis(100)).forEach(records::add);
        }

        Set<Integer> owned() {
            return numbers(consumer.assignment());
        }

        int generation() {
            return consumer.groupMetadata().generationId();
        }
    }

    static Set<Integer> numbers(Collection<TopicPartition> partitions) {
        Set<Integer> out = new TreeSet<>();
        partitions.forEach(tp -> out.add(tp.partition()));
        return out;
    }

    static void pollUntil(List<Member> members, BooleanSupplier done, String what, int seconds) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                StringBuilder state = new StringBuilder();
                members.forEach(m -> state.append(' ').append(m.name).append(m.owned())
                        .append(m.events));
                throw new Check.Failed("timed out after " + seconds + " s waiting for " + what
                        + ":" + state);
            }
            members.forEach(Member::poll);
        }
    }

    static boolean split(Member a, Member b) {
        Set<Integer> all = new HashSet<>(a.owned());
        all.addAll(b.owned());
        return a.owned().size() == PARTITIONS / 2 && b.owned().size() == PARTITIONS / 2
                && all.size() == PARTITIONS;
    }

    static void produce(Env env, String topic, int perPartition, String tag) {
        try (KafkaProducer<byte[], byte[]> p = env.producer(Map.of())) {
            for (int part = 0; part < PARTITIONS; part++) {
                for (int i = 0; i < perPartition; i++) {
                    p.send(new ProducerRecord<>(topic, part, null, bytes(tag + "-" + part + "-" + i)));
                }
            }
            p.flush();
        }
    }

    /** Produces `perPartition` records to partitions 0 and 1. */
    static void produce2(Env env, String topic, int perPartition) {
        try (KafkaProducer<byte[], byte[]> p = env.producer(Map.of())) {
            for (int part = 0; part < 2; part++) {
                for (int i = 0; i < perPartition; i++) {
                    p.send(new ProducerRecord<>(topic, part, null, bytes("r-" + part + "-" + i)));
                }
            }
            p.flush();
        }
    }

    static Map<String, Object> groupConfig(String group, Map<String, Object> extra) {
        Map<String, Object> c = new HashMap<>(extra);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        return c;
    }

    static void eager(Env env) throws Exception {
        twoMembers(env, Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                RangeAssignor.class.getName()), false);
    }

    static void cooperative(Env env) throws Exception {
        twoMembers(env, Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                CooperativeStickyAssignor.class.getName()), true);
    }

    static void consumerProtocol(Env env) throws Exception {
        twoMembers(env, Map.of("group.protocol", "consumer"), true);
    }

    /**
     * One member takes all partitions, a second joins and they split them, each consumes
     * only its partitions' records and commits; the second leaves (close) and the first
     * takes over, revoking all it had (eager) or keeping it (incremental), and reads only
     * the records produced after the second's commits.
     */
    static void twoMembers(Env env, Map<String, Object> extra, boolean incremental)
            throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, PARTITIONS, Map.of());
        Map<String, Object> config = groupConfig(env.name("g"), extra);
        Member one = new Member(env, "one", topic, config);
        Member two = null;
        try {
            pollUntil(List.of(one), () -> one.owned().size() == PARTITIONS,
                    "the first member owns every partition", 30);
            Check.equal(Set.of(0, 1, 2, 3), one.owned(), "first member alone owns");
            Member second = new Member(env, "two", topic, config);
            two = second;
            pollUntil(List.of(one, second), () -> split(one, second),
                    "two members split the partitions", 30);
            Check.saw("split: one " + one.owned() + ", two " + second.owned()
                    + "; one's callbacks " + one.events);
            produce(env, topic, 10, "first");
            pollUntil(List.of(one, second),
                    () -> one.records.size() + second.records.size() >= PARTITIONS * 10,
                    "40 records consumed", 30);
            for (Member m : List.of(one, second)) {
                Set<Integer> from = new TreeSet<>();
                m.records.forEach(r -> from.add(r.partition()));
                Check.that(m.owned().containsAll(from), m.name + " read only its partitions",
                        from);
                m.consumer.commitSync();
            }
            Set<String> values = new HashSet<>();
            one.records.forEach(r -> values.add(new String(r.value(), StandardCharsets.UTF_8)));
            second.records.forEach(r -> values.add(new String(r.value(), StandardCharsets.UTF_8)));
            Check.equal(PARTITIONS * 10, one.records.size() + second.records.size(),
                    "records consumed by the two members");
            Check.equal(PARTITIONS * 10, values.size(), "distinct records consumed");

            Set<Integer> kept = one.owned();
            int generation = one.generation();
            int eventsBefore = one.events.size();
            second.consumer.close(Duration.ofSeconds(10));
            two = null;
            // The consumer protocol's client may show the new assignment before it runs
            // the callback (on a later poll), so wait for both.
            pollUntil(List.of(one), () -> one.owned().size() == PARTITIONS
                    && one.events.subList(eventsBefore, one.events.size()).stream()
                            .anyMatch(e -> e.startsWith("assigned [") && !e.equals("assigned []")),
                    "the remaining member takes every partition", 30);
            List<String> events = one.events.subList(eventsBefore, one.events.size());
            Set<Integer> gained = new TreeSet<>(Set.of(0, 1, 2, 3));
            gained.removeAll(kept);
            if (incremental) {
                Check.that(events.stream().noneMatch(e -> e.startsWith("revoked [")
                        && !e.equals("revoked []")), "no partition revoked from the "
                        + "remaining member", events);
                Check.that(events.contains("assigned " + gained),
                        "only the departed member's partitions assigned", events);
            } else {
                Check.that(events.contains("revoked " + kept),
                        "eager: everything the remaining member had revoked first", events);
                Check.that(events.contains("assigned [0, 1, 2, 3]"),
                        "eager: then every partition assigned", events);
            }
            Check.that(one.generation() > generation, "the group's generation moved",
                    generation + " -> " + one.generation());
            one.records.clear();
            produce(env, topic, 2, "second");
            pollUntil(List.of(one), () -> one.records.size() >= PARTITIONS * 2,
                    "the records produced after the hand-over", 30);
            long late = 0;
            for (int i = 0; i < 10; i++) {
                one.poll();
            }
            late = one.records.stream()
                    .filter(r -> !new String(r.value(), StandardCharsets.UTF_8)
                            .startsWith("second-")).count();
            Check.equal(PARTITIONS * 2, one.records.size(),
                    "records read after the hand-over (from the departed member's commits)");
            Check.equal(0L, late, "records read again");
        } finally {
            one.consumer.close(Duration.ofSeconds(10));
            if (two != null) {
                two.consumer.close(Duration.ofSeconds(10));
            }
        }
    }

    /**
     * Static members: one closes (a static member does not leave) and a new consumer with
     * its group.instance.id takes its place with the same partitions, without a rebalance:
     * the other member sees no callback and the generation stays.
     */
    static void staticMembership(Env env) throws Exception {
        staticMembership(env, false);
    }

    static void consumerProtocolStaticMembership(Env env) throws Exception {
        staticMembership(env, true);
    }

    /**
     * The classic protocol's members (range assignor, a session of `sessionMs`), or the
     * consumer protocol's (KIP-848: the coordinator's session timeout and assignor).
     */
    static Map<String, Object> protocolConfig(boolean consumerProtocol, int sessionMs) {
        if (consumerProtocol) {
            return Map.of("group.protocol", "consumer");
        }
        return Map.of(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs,
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1_000,
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
    }

    static void staticMembership(Env env, boolean consumerProtocol) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, PARTITIONS, Map.of());
        String group = env.name("g");
        Map<String, Object> base = protocolConfig(consumerProtocol, 30_000);
        Map<String, Object> a = groupConfig(group, base);
        a.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-a");
        Map<String, Object> b = groupConfig(group, base);
        b.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-b");
        Member one = new Member(env, "a", topic, a);
        Member two = new Member(env, "b", topic, b);
        Member again = null;
        try {
            pollUntil(List.of(one, two), () -> split(one, two), "two static members split", 40);
            // Let a rebalance still under way settle before the restart.
            for (int i = 0; i < 10; i++) {
                one.poll();
                two.poll();
            }
            Set<Integer> owned = one.owned();
            int generation = two.generation();
            int eventsOfB = two.events.size();
            Check.saw("a owns " + owned + ", b owns " + two.owned() + ", generation "
                    + generation);
            one.consumer.close(Duration.ofSeconds(10));
            Member restarted = new Member(env, "a-again", topic, a);
            again = restarted;
            pollUntil(List.of(restarted, two), () -> !restarted.owned().isEmpty(),
                    "the restarted static member is assigned", 30);
            for (int i = 0; i < 10; i++) {
                restarted.poll();
                two.poll();
            }
            Check.equal(owned, restarted.owned(), "the restarted member's partitions");
            if (!consumerProtocol) {
                Check.equal(generation, restarted.generation(),
                        "the restarted member's generation");
            }
            Check.equal(generation, two.generation(), "the other member's generation (epoch)");
            Check.equal(List.of(), two.events.subList(eventsOfB, two.events.size()),
                    "callbacks of the other member during the restart");
        } finally {
            for (Member m : new Member[] {one, two, again}) {
                if (m != null) {
                    try {
                        m.consumer.close(Duration.ofSeconds(10));
                    } catch (IllegalStateException closedAlready) {
                        // one was closed for the restart
                    }
                }
            }
        }
    }

    /**
     * A second member runs in a child JVM that is killed (SIGKILL) once the group is
     * split: it never leaves, so the first member gets its partitions only when the
     * member's session times out, and then reads every partition.
     */
    static void crashedMember(Env env) throws Exception {
        crashedMember(env, false);
    }

    static void consumerProtocolCrashedMember(Env env) throws Exception {
        crashedMember(env, true);
    }

    /**
     * For the consumer protocol the session timeout is the coordinator's
     * (group.consumer.session.timeout.ms, passed as session.ms=N by the test).
     */
    static void crashedMember(Env env, boolean consumerProtocol) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, PARTITIONS, Map.of());
        String group = env.name("g");
        int sessionMs = env.intArg("session.ms", 6_000);
        Map<String, Object> config = groupConfig(group, protocolConfig(consumerProtocol,
                sessionMs));
        Member one = new Member(env, "parent", topic, config);
        Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
        Process child = new ProcessBuilder(java.toString(), "-cp",
                System.getProperty("java.class.path"), Main.class.getName(),
                "group-crash-member", env.bootstrap, "group=" + group, "topic=" + topic,
                "session.ms=" + sessionMs, "protocol=" + (consumerProtocol ? "consumer" : "classic"),
                "deadline.s=60").redirectErrorStream(true).start();
        AtomicInteger childOwns = new AtomicInteger();
        Thread relay = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(
                    child.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    System.out.println("child: " + line);
                    if (line.startsWith("OWNS ")) {
                        childOwns.set(Integer.parseInt(line.substring(5).trim()));
                    }
                }
            } catch (java.io.IOException ignored) {
                // the child was killed
            }
        }, "child-relay");
        relay.setDaemon(true);
        relay.start();
        try {
            pollUntil(List.of(one), () -> one.owned().size() == PARTITIONS / 2
                    && childOwns.get() == PARTITIONS / 2, "parent and child split", 40);
            Check.saw("parent owns " + one.owned() + ", the child the rest");
            child.destroyForcibly();
            Check.that(child.waitFor(10, TimeUnit.SECONDS), "the child JVM was killed",
                    "pid " + child.pid());
            long killed = System.nanoTime();
            pollUntil(List.of(one), () -> one.owned().size() == PARTITIONS,
                    "the parent takes the crashed member's partitions", 40);
            long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
            Check.that(waitedMs >= sessionMs / 2, "the hand-over waited for the session to "
                    + "expire (no leave was sent)", waitedMs + " ms");
            one.records.clear();
            produce(env, topic, 3, "after");
            pollUntil(List.of(one), () -> one.records.size() >= PARTITIONS * 3,
                    "records of every partition", 30);
            Set<Integer> from = new TreeSet<>();
            one.records.forEach(r -> from.add(r.partition()));
            Check.equal(Set.of(0, 1, 2, 3), from, "partitions the survivor reads");
        } finally {
            child.destroyForcibly();
            one.consumer.close(Duration.ofSeconds(10));
        }
    }

    /**
     * KIP-848's regular expression subscription, resolved by the coordinator
     * (SubscriptionPattern, kafka-clients 4.x only, so reached by reflection here): the
     * member gets the partitions of the topics that match, reads only their records, and
     * gets a matching topic created later.
     */
    static void consumerProtocolRegex(Env env) throws Exception {
        String prefix = env.name("rx");
        try (Admin admin = env.admin()) {
            env.createTopic(admin, prefix + "-a", 2, Map.of());
            env.createTopic(admin, prefix + "-b", 2, Map.of());
            env.createTopic(admin, "other-" + prefix, 1, Map.of());
            Member m = new Member(env, "regex", null, groupConfig(env.name("g"),
                    Map.of("group.protocol", "consumer")));
            try {
                Class<?> pattern = Class.forName(
                        "org.apache.kafka.clients.consumer.SubscriptionPattern");
                KafkaConsumer.class.getMethod("subscribe", pattern,
                        ConsumerRebalanceListener.class).invoke(m.consumer,
                        pattern.getConstructor(String.class).newInstance(prefix + "-.*"), m);
                pollUntil(List.of(m), () -> m.consumer.assignment().size() == 4,
                        "the partitions of the two matching topics", 30);
                Check.equal(Set.of(prefix + "-a", prefix + "-b"), topics(m),
                        "topics assigned by the pattern");
                try (KafkaProducer<byte[], byte[]> p = env.producer(Map.of())) {
                    for (String t : List.of(prefix + "-a", prefix + "-b", "other-" + prefix)) {
                        for (int i = 0; i < 5; i++) {
                            p.send(new ProducerRecord<>(t, bytes(t + "-" + i)));
                        }
                    }
                    p.flush();
                }
                pollUntil(List.of(m), () -> m.records.size() >= 10, "10 records", 30);
                for (int i = 0; i < 5; i++) {
                    m.poll();
                }
                Check.equal(10, m.records.size(), "records read (none of the other topic)");
                env.createTopic(admin, prefix + "-c", 1, Map.of());
                pollUntil(List.of(m), () -> m.consumer.assignment().size() == 5,
                        "the partition of a matching topic created later", 40);
                Check.equal(Set.of(prefix + "-a", prefix + "-b", prefix + "-c"), topics(m),
                        "topics assigned once the third exists");
            } finally {
                m.consumer.close(Duration.ofSeconds(10));
            }
        }
    }

    static Set<String> topics(Member m) {
        Set<String> out = new TreeSet<>();
        m.consumer.assignment().forEach(tp -> out.add(tp.topic()));
        return out;
    }

    /** The child JVM of crashedMember: joins, says how many partitions it owns, polls on. */
    static void crashMemberChild(Env env) {
        Map<String, Object> config = groupConfig(env.arg("group", ""), protocolConfig(
                env.arg("protocol", "classic").equals("consumer"),
                env.intArg("session.ms", 6_000)));
        Member m = new Member(env, "child", env.arg("topic", ""), config);
        int said = -1;
        while (true) {
            m.poll();
            if (m.owned().size() != said) {
                said = m.owned().size();
                System.out.println("OWNS " + said);
                System.out.flush();
            }
        }
    }
}
