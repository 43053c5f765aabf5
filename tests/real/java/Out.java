import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/** JSON lines on stdout, shared by the drivers (the Python tests parse every line starting with '{'). */
final class Out {
    private Out() {
    }

    static synchronized void line(Map<String, Object> fields) {
        System.out.println(JSON.toJSONString(fields));
        System.out.flush();
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /** What a consumer observed of one message. */
    static Map<String, Object> message(MessageExt m) {
        Map<String, String> user = new TreeMap<>();
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            // __SHARDINGKEY (the message group) is a system property the 5.x set does not list.
            if (!MessageConst.STRING_HASH_SET.contains(e.getKey()) && !e.getKey().equals("__SHARDINGKEY")) {
                user.put(e.getKey(), e.getValue());
            }
        }
        return map(
            "topic", m.getTopic(),
            "broker", m.getBrokerName(),
            "queueId", m.getQueueId(),
            "queueOffset", m.getQueueOffset(),
            "msgId", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            "tags", m.getTags(),
            "keys", m.getKeys(),
            "body", Base64.getEncoder().encodeToString(m.getBody()),
            "bodyText", new String(m.getBody(), StandardCharsets.UTF_8),
            "properties", user,
            "shardingKey", m.getProperty("__SHARDINGKEY"),
            "reconsumeTimes", m.getReconsumeTimes(),
            "bornTimestamp", m.getBornTimestamp(),
            "storeTimestamp", m.getStoreTimestamp(),
            "realTopic", m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC));
    }
}
