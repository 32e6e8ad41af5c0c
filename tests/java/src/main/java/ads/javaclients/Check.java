package ads.javaclients;

import java.util.Objects;

/** Checks that print what they saw and stop the scenario at the first one that fails. */
final class Check {
    private Check() {}

    static final class Failed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Failed(String message) {
            super(message);
        }

        Failed(String message, Throwable cause) {
            super(message, cause);
        }
    }

    static void equal(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) {
            throw new Failed(what + ": expected " + expected + ", saw " + actual);
        }
        System.out.println("ok   " + what + " = " + actual);
    }

    static void that(boolean condition, String what, Object seen) {
        if (!condition) {
            throw new Failed(what + ": saw " + seen);
        }
        System.out.println("ok   " + what + " (" + seen + ")");
    }

    /** The exception or one of its causes is one of the given classes. */
    static Throwable caused(Throwable error, String what, Class<?>... classes) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            for (Class<?> c : classes) {
                if (c.isInstance(t)) {
                    System.out.println("ok   " + what + " (" + t.getClass().getSimpleName()
                            + ": " + t.getMessage() + ")");
                    return t;
                }
            }
        }
        throw new Failed(what + ": unexpected " + error, error);
    }

    static void saw(String line) {
        System.out.println("saw  " + line);
    }
}
