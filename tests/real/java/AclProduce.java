import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Apache's Java producer signing its requests with AclClientRPCHook: AclProduce NAMESRV TOPIC ACCESS_KEY
 * SECRET_KEY. Sends one message (no retries) and prints one JSON line: the send status, or the broker's
 * response code and message.
 */
public class AclProduce {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("drv-acl-" + args[1],
            new AclClientRPCHook(new SessionCredentials(args[2], args[3])));
        producer.setNamesrvAddr(args[0]);
        // Name server and heartbeat calls get 15 s, not the default 3 s: in a JVM just started on a loaded
        // 2-core machine Netty's first connect alone can take 2 s of those 3 (a route query then timed out).
        producer.setMqClientApiTimeout(15000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10000);
        producer.start();
        try {
            SendResult r = producer.send(new Message(args[1], "TagA", "acl".getBytes(StandardCharsets.UTF_8)));
            Out.line(Out.map("status", r.getSendStatus().name(), "queueId", r.getMessageQueue().getQueueId()));
        } catch (MQBrokerException e) {
            Out.line(Out.map("code", e.getResponseCode(), "error", e.getErrorMessage()));
        } catch (MQClientException e) {
            Throwable cause = e.getCause();
            if (cause instanceof MQBrokerException) {
                MQBrokerException b = (MQBrokerException) cause;
                Out.line(Out.map("code", b.getResponseCode(), "error", b.getErrorMessage()));
            } else {
                Out.line(Out.map("code", e.getResponseCode(), "error", String.valueOf(e.getErrorMessage())));
            }
        } finally {
            producer.shutdown();
        }
        System.exit(0);
    }
}
