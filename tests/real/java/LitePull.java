import java.lang.reflect.Field;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.impl.consumer.DefaultLitePullConsumerImpl;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Apache's lite pull consumer (remoting), from the first offset: LitePull NAMESRV TOPIC GROUP EXPECTED
 * [TIMEOUT_S=60] [FILTER=*]. Reads until EXPECTED distinct (queue, offset) pairs were seen and then one
 * more quiet poll (so extra messages show), or until the timeout; commits its offsets. One JSON line per
 * message, then {"event":"done",...} with the offsets pushed to the broker per queue.
 *
 * <p>The client persists consume offsets with oneway UPDATE_CONSUMER_OFFSET frames (on its 5 s timer and at
 * shutdown), so a frame lost while the JVM exits leaves a queue uncommitted. After commitSync the driver
 * therefore pushes each offset the client holds with a synchronous request, which fails loudly instead.
 */
public class LitePull {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int expected = Integer.parseInt(args[3]);
        long timeoutMs = 1000L * (args.length > 4 ? Integer.parseInt(args[4]) : 60);
        String filter = args.length > 5 ? args[5] : "*";
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(namesrv);
        // Name server and heartbeat calls get 15 s, not the default 3 s: in a JVM just started on a loaded
        // 2-core machine Netty's first connect alone can take 2 s of those 3 (a route query then timed out).
        c.setMqClientApiTimeout(15000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullBatchSize(256);
        c.setAutoCommit(true);
        c.subscribe(topic, filter);
        c.start();
        long t0 = System.currentTimeMillis();
        long deadline = t0 + timeoutMs;
        Set<String> seen = new HashSet<>();
        int total = 0;
        boolean quietAfterDone = false;
        Map<String, Long> pushed = new TreeMap<>();
        try {
            while (System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = c.poll(seen.size() >= expected ? 1500 : 1000);
                for (MessageExt m : batch) {
                    total++;
                    seen.add(m.getBrokerName() + "/" + m.getQueueId() + "/" + m.getQueueOffset());
                    Out.line(Out.message(m));
                }
                if (seen.size() >= expected && batch.isEmpty()) {
                    quietAfterDone = true;
                    break;
                }
            }
            c.commitSync();
            pushed = pushOffsetsSync(c);
        } finally {
            Out.line(Out.map("event", "done", "distinct", seen.size(), "total", total, "complete", quietAfterDone,
                "millis", System.currentTimeMillis() - t0, "pushed", pushed));
            c.shutdown();
            System.exit(0);
        }
    }

    /** Sends each offset the client holds in memory to its broker with a synchronous request. */
    static Map<String, Long> pushOffsetsSync(DefaultLitePullConsumer c) throws Exception {
        Field f = DefaultLitePullConsumer.class.getDeclaredField("defaultLitePullConsumerImpl");
        f.setAccessible(true);
        OffsetStore store = ((DefaultLitePullConsumerImpl) f.get(c)).getOffsetStore();
        Map<String, Long> pushed = new TreeMap<>();
        for (org.apache.rocketmq.common.message.MessageQueue mq : c.assignment()) {
            long offset = store.readOffset(mq, ReadOffsetType.READ_FROM_MEMORY);
            if (offset >= 0) {
                store.updateConsumeOffsetToBroker(mq, offset, false);
            }
            pushed.put(mq.getBrokerName() + "/" + mq.getQueueId(), offset);
        }
        return pushed;
    }
}
