import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Apache's Java producer (remoting): Produce NAMESRV TOPIC COUNT MODE [ARG].
 * MODE: single | batch (ARG = batch size, 32) | orderly (ARG = message groups, 4: MessageQueueSelector by
 * group hash) | delay (ARG = delay level, 2) | tx-commit | tx-rollback | tx-check (the local transaction
 * answers UNKNOW and the broker's check-back commits; ARG = seconds to wait for the checks, 60).
 * Message i: body "body-i", tag Tag{A,B,C}, keys "k-i", property index=i. One JSON line per message sent.
 */
public class Produce {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String mode = args[3];
        String arg = args.length > 4 ? args[4] : null;
        DefaultMQProducer producer;
        final ConcurrentHashMap<String, Integer> checks = new ConcurrentHashMap<>();
        final AtomicInteger checked = new AtomicInteger();
        if (mode.startsWith("tx-")) {
            TransactionMQProducer tx = new TransactionMQProducer("drv-tx-" + topic);
            tx.setTransactionListener(new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message msg, Object a) {
                    switch (mode) {
                        case "tx-commit":
                            return LocalTransactionState.COMMIT_MESSAGE;
                        case "tx-rollback":
                            return LocalTransactionState.ROLLBACK_MESSAGE;
                        default:
                            return LocalTransactionState.UNKNOW;
                    }
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    String id = msg.getProperty("UNIQ_KEY");
                    if (checks.putIfAbsent(id, 1) == null) {
                        checked.incrementAndGet();
                        Out.line(Out.map("event", "check", "msgId", id, "transactionId", msg.getTransactionId()));
                    }
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
            });
            producer = tx;
        } else {
            producer = new DefaultMQProducer("drv-producer-" + topic);
        }
        producer.setNamesrvAddr(namesrv);
        // Name server and heartbeat calls get 15 s, not the default 3 s: in a JVM just started on a loaded
        // 2-core machine Netty's first connect alone can take 2 s of those 3 (a route query then timed out).
        producer.setMqClientApiTimeout(15000);
        producer.setSendMsgTimeout(10000);
        producer.start();
        int exit = 0;
        try {
            if (mode.equals("batch")) {
                int size = arg == null ? 32 : Integer.parseInt(arg);
                for (int start = 0; start < count; start += size) {
                    List<Message> batch = new ArrayList<>();
                    for (int i = start; i < Math.min(count, start + size); i++) {
                        batch.add(message(topic, i));
                    }
                    SendResult r = producer.send(batch);
                    // One result for the batch: its ids are comma-separated, its offset the first message's.
                    String[] ids = r.getMsgId().split(",");
                    for (int i = start; i < start + batch.size(); i++) {
                        Out.line(Out.map("i", i, "status", r.getSendStatus().name(), "msgId", ids[i - start],
                            "broker", r.getMessageQueue().getBrokerName(), "queueId", r.getMessageQueue().getQueueId(),
                            "queueOffset", r.getQueueOffset() + (i - start)));
                    }
                }
                return;
            }
            for (int i = 0; i < count; i++) {
                Message m = message(topic, i);
                SendResult r;
                String group = null;
                long sentAt = System.currentTimeMillis();
                switch (mode) {
                    case "single":
                        r = producer.send(m);
                        break;
                    case "orderly": {
                        int groups = arg == null ? 4 : Integer.parseInt(arg);
                        group = "group-" + (i % groups);
                        final String g = group;
                        r = producer.send(m, (List<MessageQueue> mqs, Message msg, Object o) ->
                            mqs.get(Math.floorMod(g.hashCode(), mqs.size())), group);
                        break;
                    }
                    case "delay":
                        m.setDelayTimeLevel(arg == null ? 2 : Integer.parseInt(arg));
                        r = producer.send(m);
                        break;
                    default: {
                        TransactionSendResult t = ((TransactionMQProducer) producer).sendMessageInTransaction(m, null);
                        Out.line(Out.map("i", i, "status", t.getSendStatus().name(), "msgId", t.getMsgId(),
                            "broker", t.getMessageQueue().getBrokerName(), "queueId", t.getMessageQueue().getQueueId(),
                            "queueOffset", t.getQueueOffset(), "localState", t.getLocalTransactionState().name(),
                            "sentAt", sentAt));
                        continue;
                    }
                }
                Out.line(Out.map("i", i, "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
                    "broker", r.getMessageQueue().getBrokerName(), "queueId", r.getMessageQueue().getQueueId(),
                    "queueOffset", r.getQueueOffset(), "group", group, "sentAt", sentAt));
            }
            if (mode.equals("tx-check")) {
                long until = System.currentTimeMillis() + 1000L * (arg == null ? 60 : Integer.parseInt(arg));
                while (checked.get() < count && System.currentTimeMillis() < until) {
                    Thread.sleep(200);
                }
            }
        } catch (Throwable e) {
            // A send that failed ends the run with its cause on stderr and a non-zero exit (the tests' runner
            // raises it), never as a silently shorter list of sends.
            Out.line(Out.map("event", "error", "error", e.toString()));
            e.printStackTrace();
            exit = 1;
        } finally {
            producer.shutdown();
            System.out.flush();
            System.err.flush();
            System.exit(exit);
        }
    }

    static Message message(String topic, int i) {
        Message m = new Message(topic, "Tag" + "ABC".charAt(i % 3), "k-" + i,
            ("body-" + i).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("index", Integer.toString(i));
        return m;
    }
}
