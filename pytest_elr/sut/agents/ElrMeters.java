// Reads the Count of Kafka's Yammer meters from a running Kafka JVM in the same container:
// attaches to it (jdk.attach), starts its local JMX agent (no port: nothing is configured at the
// node's start) and prints "<ObjectName> <Count>" per meter, "<ObjectName> absent" for one the
// release does not register. Run as a single-file source program:
//   java ElrMeters.java <pid> <ObjectName>...
import com.sun.tools.attach.VirtualMachine;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class ElrMeters {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String address;
        try {
            address = vm.startLocalManagementAgent();
        } finally {
            vm.detach();
        }
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            for (int i = 1; i < args.length; i++) {
                ObjectName name = new ObjectName(args[i]);
                System.out.println(args[i] + " "
                    + (server.isRegistered(name) ? server.getAttribute(name, "Count") : "absent"));
            }
        }
    }
}
