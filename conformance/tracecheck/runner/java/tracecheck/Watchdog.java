package tracecheck;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;

/**
 * Runs the main class named first (TLC, or {@code tracecheck.Loopback}) and ends the JVM when
 * standard input closes. tracecheck starts every TLC with a pipe on standard input that it never
 * writes; the kernel closes it when tracecheck ends, however it ends (SIGKILL included), so TLC,
 * which runs in a session of its own so that a timeout can kill its group, cannot outlive the
 * process that started it. TLC itself never reads standard input.
 */
public final class Watchdog {
    private Watchdog() {}

    public static void main(String[] args) throws Throwable {
        InputStream in = System.in;
        Thread watch = new Thread(() -> {
            byte[] buffer = new byte[256];
            try {
                while (in.read(buffer) >= 0) {
                    // nothing is ever written: only the end of the stream matters
                }
            } catch (IOException closed) {
                // a broken pipe is an end too
            }
            Runtime.getRuntime().halt(137); // as SIGKILL: no shutdown hook can keep it alive
        }, "tracecheck-watchdog");
        watch.setDaemon(true);
        watch.start();
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        try {
            main.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException exc) {
            throw exc.getCause();
        }
    }
}
