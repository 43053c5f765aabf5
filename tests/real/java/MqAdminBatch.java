import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs several mqadmin commands in one JVM (a JVM start per command costs seconds on two cores).
 * stdin: one JSON array of arguments per line, e.g. ["updateTopic","-c","DefaultCluster","-t","T","-n","127.0.0.1:9876"].
 * stdout: each command's own output, then a line "@@mqadmin-end N".
 */
public class MqAdminBatch {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        int n = 0;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) {
                continue;
            }
            List<String> argv = JSON.parseArray(line, String.class);
            try {
                MQAdminStartup.main0(argv.toArray(new String[0]), null);
            } catch (Throwable t) {
                t.printStackTrace(System.out);
            }
            System.out.flush();
            System.out.println();
            System.out.println("@@mqadmin-end " + n++);
            System.out.flush();
        }
        System.exit(0);
    }
}
