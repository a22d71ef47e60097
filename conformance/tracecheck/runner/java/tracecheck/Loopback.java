package tracecheck;

import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.rmi.server.RMISocketFactory;

/**
 * Runs TLC 2.15's distributed server or worker (the class named first) with every RMI server
 * socket bound to the loopback address: TLCServer's registry and the objects it and TLCWorker
 * export would otherwise listen on every interface. tracecheck starts the server and workers of
 * {@code check --distributed} through this class when they all run on this machine; workers on
 * other hosts need the server on a reachable address, and run TLC's classes directly.
 */
public final class Loopback {
    private Loopback() {}

    public static void main(String[] args) throws Exception {
        RMISocketFactory.setSocketFactory(new RMISocketFactory() {
            @Override
            public ServerSocket createServerSocket(int port) throws IOException {
                return new ServerSocket(port, 50, InetAddress.getLoopbackAddress());
            }

            @Override
            public Socket createSocket(String host, int port) throws IOException {
                return new Socket(host, port);
            }
        });
        String[] rest = new String[args.length - 1];
        System.arraycopy(args, 1, rest, 0, rest.length);
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        main.invoke(null, (Object) rest);
    }
}
