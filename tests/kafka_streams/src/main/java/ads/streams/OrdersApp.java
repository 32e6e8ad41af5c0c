package ads.streams;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * One instance of a Kafka Streams application, run until it is stopped:
 * {@code OrdersApp BOOTSTRAP key=value ...} with {@code app.id}, {@code state.dir} and
 * {@code deadline.s} (the JVM halts itself with status 2 past it), and optionally
 * {@code stall.after} (see {@link Stall}).
 *
 * <p>The topology, with {@code processing.guarantee=exactly_once_v2}:
 * <ul>
 * <li>{@code orders} (key: order id, value: {@code customer:amount}) joined with
 * {@code payments} (key: order id, value: a payment method) within 30 s (a stream-stream
 * join: two windowed RocksDB stores, each with its changelog) into {@code paid}, value
 * {@code customer:amount:method};</li>
 * <li>{@code orders} re-keyed by customer (a repartition topic, {@code by-customer}) and
 * aggregated per customer in 10 s tumbling windows into the order ids seen, in the order
 * processed (a windowed RocksDB store, {@code orders-per-window}, and its changelog), every
 * update written to {@code windowed} with key {@code customer@windowStartMs}.</li>
 * </ul>
 * The record cache is off, so each order makes exactly one update of its window: the
 * committed output then holds one record per input order in each output topic.
 *
 * <p>Prints {@code STATE <state>} at each state change; SIGTERM closes the instance
 * (committing its tasks) and prints {@code CLOSED} once closed. A stream thread's uncaught
 * error shuts the client down and exits 1.
 */
public final class OrdersApp {
    private OrdersApp() {}

    static Topology topology(int stallAfter) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> orders = builder.stream("orders");
        KStream<String, String> payments = builder.stream("payments");
        KStream<String, String> paid = orders.join(payments,
                (order, method) -> order + ":" + method,
                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(30), Duration.ofHours(1)),
                StreamJoined.<String, String, String>as("paid-join").withStoreName("paid-join"));
        KStream<String, String> windowed = orders
                .map((orderId, order) -> KeyValue.pair(order.split(":")[0], orderId))
                .repartition(Repartitioned.as("by-customer"))
                .groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10),
                        Duration.ofHours(1)))
                .aggregate(() -> "",
                        (customer, orderId, ids) -> ids.isEmpty() ? orderId : ids + "," + orderId,
                        Materialized.as("orders-per-window"))
                .toStream((window, ids) -> window.key() + "@" + window.window().start());
        // Each output's sink first, then the stall: a record reaches the stall once it has
        // been sent in the open transaction.
        Stall stall = new Stall(stallAfter);
        paid.to("paid");
        paid.foreach((key, value) -> stall.written());
        windowed.to("windowed");
        windowed.foreach((key, value) -> stall.written());
        return builder.build();
    }

    /**
     * With {@code stall.after=N}, the instance stops in the middle of a transaction: after it
     * has sent its N-th output record, its stream thread prints {@code STALLED} and sleeps, so
     * the transaction stays open with that record in it until the test kills the instance.
     */
    static final class Stall {
        private final int after;
        private final AtomicInteger written = new AtomicInteger();

        Stall(int after) {
            this.after = after;
        }

        void written() {
            if (written.incrementAndGet() == after) {
                System.out.println("STALLED after " + after + " output records");
                System.out.flush();
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    static Properties config(Map<String, String> args) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("app.id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state.dir"));
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A killed instance's tasks move once its session lapses: 6 s, not 45.
        props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG),
                6000);
        props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG),
                1000);
        // Records go to the brokers as they are processed rather than at the commit, so an
        // instance killed in the middle of a transaction leaves records for it to abort.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 0);
        return props;
    }

    static String streamsVersion() throws IOException {
        try (InputStream in = KafkaStreams.class.getResourceAsStream(
                "/kafka/kafka-streams-version.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        }
    }

    public static void main(String[] argv) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        Map<String, String> args = new TreeMap<>();
        args.put("bootstrap", argv[0]);
        for (int i = 1; i < argv.length; i++) {
            String[] kv = argv[i].split("=", 2);
            args.put(kv[0], kv[1]);
        }
        int deadline = Integer.parseInt(args.getOrDefault("deadline.s", "120"));
        Thread watchdog = new Thread(() -> {
            try {
                TimeUnit.SECONDS.sleep(deadline);
                System.out.println("FAIL deadline passed");
                System.out.flush();
                Runtime.getRuntime().halt(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "deadline");
        watchdog.setDaemon(true);
        watchdog.start();
        System.out.println("kafka-streams " + streamsVersion() + ", state dir "
                + Path.of(args.get("state.dir")));
        Topology topology = topology(Integer.parseInt(args.getOrDefault("stall.after", "0")));
        System.out.println(topology.describe());
        KafkaStreams streams = new KafkaStreams(topology, config(args));
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(error -> {
            System.out.println("FAIL stream thread: " + error);
            error.printStackTrace(System.out);
            System.out.flush();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            System.out.println("CLOSED");
            System.out.flush();
            closed.countDown();
        }, "close"));
        streams.start();
        while (!closed.await(200, TimeUnit.MILLISECONDS)) {
            if (streams.state() == KafkaStreams.State.ERROR) {
                System.out.println("FAIL the instance is in state ERROR");
                System.out.flush();
                Runtime.getRuntime().halt(1);
            }
        }
    }
}
