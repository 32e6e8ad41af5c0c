package ads.javaclients;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Runs one scenario of Apache Kafka's Java client against a running cluster:
 * {@code Main SCENARIO BOOTSTRAP [key=value ...]}. Exits 0 when every check held, 1 when one
 * failed (the reason on stdout), 2 when the scenario outlived its deadline
 * ({@code deadline.s=N}, default 100).
 */
public final class Main {
    private Main() {}

    interface Scenario {
        void run(Env env) throws Exception;
    }

    private static final Map<String, Scenario> SCENARIOS = new TreeMap<>(Map.ofEntries(
            Map.entry("produce-codecs", ProducerScenarios::codecs),
            Map.entry("produce-failover", ProducerScenarios::failover),
            Map.entry("transactions", TransactionScenarios::consumeTransformProduce),
            Map.entry("transactions-fencing", TransactionScenarios::fencing),
            Map.entry("group-eager", GroupScenarios::eager),
            Map.entry("group-cooperative", GroupScenarios::cooperative),
            Map.entry("group-consumer-protocol", GroupScenarios::consumerProtocol),
            Map.entry("group-static", GroupScenarios::staticMembership),
            Map.entry("group-crash", GroupScenarios::crashedMember),
            Map.entry("group-crash-member", GroupScenarios::crashMemberChild),
            Map.entry("group-consumer-protocol-static",
                    GroupScenarios::consumerProtocolStaticMembership),
            Map.entry("group-consumer-protocol-regex", GroupScenarios::consumerProtocolRegex),
            Map.entry("group-consumer-protocol-crash",
                    GroupScenarios::consumerProtocolCrashedMember),
            Map.entry("consumer-positions", ConsumerScenarios::positions),
            Map.entry("admin", AdminScenarios::admin),
            Map.entry("admin-groups", AdminScenarios::groups),
            Map.entry("admin-extra", AdminExtraScenarios::extra),
            Map.entry("admin-log-dirs", AdminScenarios::logDirsAndPartitions),
            Map.entry("admin-security", SecurityScenarios::aclsAndScramUsers),
            Map.entry("share-group", fourX("ads.javaclients.ShareScenarios", "shareGroup")),
            Map.entry("share-record-limit",
                    fourX("ads.javaclients.ShareScenarios", "shareRecordLimit"))));

    /** A scenario of a class compiled for kafka-clients 4.x only (pom.xml), by name. */
    private static Scenario fourX(String className, String method) {
        return env -> Class.forName(className).getDeclaredMethod(method, Env.class)
                .invoke(null, env);
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        if (args.length < 2 || !SCENARIOS.containsKey(args[0])) {
            System.err.println("usage: Main SCENARIO BOOTSTRAP [key=value ...]; scenarios: "
                    + SCENARIOS.keySet());
            System.exit(64);
        }
        Env env = new Env(args);
        Thread watchdog = new Thread(() -> {
            try {
                TimeUnit.SECONDS.sleep(env.intArg("deadline.s", 100));
                System.out.println("FAIL " + args[0] + ": deadline passed");
                System.out.flush();
                Runtime.getRuntime().halt(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "deadline");
        watchdog.setDaemon(true);
        watchdog.start();
        System.out.println("kafka-clients " + Env.clientVersion() + ", scenario "
                + args[0] + ", bootstrap " + env.bootstrap);
        try {
            SCENARIOS.get(args[0]).run(env);
        } catch (Throwable t) {
            System.out.println("FAIL " + args[0] + ": " + t);
            t.printStackTrace(System.out);
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
        System.out.println("PASS " + args[0]);
        System.out.flush();
        // Clients' threads are closed by now; halt spares waiting on any stray non-daemon one.
        Runtime.getRuntime().halt(0);
    }
}
