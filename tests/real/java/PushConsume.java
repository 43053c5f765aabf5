import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Apache's push consumer (remoting, clustering): PushConsume NAMESRV TOPIC GROUP MAX_RECONSUME EXPECTED
 * [TIMEOUT_S=90] [RESULT=RECONSUME_LATER]. Every delivery is answered RESULT, so each message is sent back
 * to %RETRY%GROUP and redelivered until MAX_RECONSUME retries, then moved to %DLQ%GROUP by the broker.
 * Stops after EXPECTED deliveries plus a quiet second, or at the timeout. One JSON line per delivery.
 */
public class PushConsume {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int maxReconsume = Integer.parseInt(args[3]);
        int expected = Integer.parseInt(args[4]);
        long timeoutMs = 1000L * (args.length > 5 ? Integer.parseInt(args[5]) : 90);
        final ConsumeConcurrentlyStatus result = ConsumeConcurrentlyStatus.valueOf(
            args.length > 6 ? args[6] : "RECONSUME_LATER");
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        // Name server and heartbeat calls get 15 s, not the default 3 s: in a JVM just started on a loaded
        // 2-core machine Netty's first connect alone can take 2 s of those 3 (a route query then timed out).
        c.setMqClientApiTimeout(15000);
        // %RETRY%GROUP exists only after the first send-back, and the client learns a topic's route on its
        // name-server poll (30 s by default): every 2 s here, so retries are not delivered ~30 s late.
        c.setPollNameServerInterval(2000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setMaxReconsumeTimes(maxReconsume);
        c.setConsumeMessageBatchMaxSize(1);
        c.subscribe(topic, "*");
        final AtomicInteger deliveries = new AtomicInteger();
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Out.line(Out.message(m));
                deliveries.incrementAndGet();
            }
            return result;
        });
        long t0 = System.currentTimeMillis();
        c.start();
        try {
            long deadline = t0 + timeoutMs;
            while (System.currentTimeMillis() < deadline && deliveries.get() < expected) {
                Thread.sleep(100);
            }
            Thread.sleep(1000);
        } finally {
            Out.line(Out.map("event", "done", "deliveries", deliveries.get(), "millis", System.currentTimeMillis() - t0));
            c.shutdown();
            System.exit(0);
        }
    }
}
