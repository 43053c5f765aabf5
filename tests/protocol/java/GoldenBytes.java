/*
 * Writes the golden files of tests/protocol/golden/ with Apache RocketMQ's own Java encoders, so the
 * Python codec in rocketmq_protocol/remoting/ is checked byte for byte against the real thing.
 *
 * Run (single-file launch, classpath = rocketmq-client and its dependencies):
 *   java -cp <jars> tests/protocol/java/GoldenBytes.java <output dir>
 * tests/protocol/java/generate_goldens.py fetches the jars with Maven and runs this for each version.
 *
 * Every value is fixed (opaque, timestamps, hosts, ids), so two runs of the same RocketMQ version write
 * the same bytes; the only exception is uniq_ids.json (MessageClientIDSetter reads the clock and pid).
 */

import java.io.IOException;
import java.lang.reflect.Array;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.AclUtils;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.compression.CompressorFactory;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageBatch;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.SerializeType;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.TopicList;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PullMessageResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeaderV2;
import org.apache.rocketmq.remoting.protocol.header.SendMessageResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

public class GoldenBytes {
    static final long BORN = 1700000000000L;
    static final long STORE = 1700000000005L;
    static Path out;
    static final Map<String, Object> manifest = new TreeMap<>();

    public static void main(String[] args) throws Exception {
        out = Paths.get(args[0]);
        Files.createDirectories(out);
        manifest.put("rocketmq_version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        manifest.put("current_version_ordinal", MQVersion.CURRENT_VERSION);
        frames();
        storedMessages();
        batch();
        ids();
        bodies();
        signatures();
        write("manifest.json", json(manifest).getBytes(StandardCharsets.UTF_8));
    }

    // ---------------------------------------------------------------- frames

    /** The bytes NettyEncoder puts on the wire: fastEncodeHeader, then the body. */
    static byte[] wire(RemotingCommand cmd) {
        ByteBuf buf = Unpooled.buffer();
        cmd.fastEncodeHeader(buf);
        if (cmd.getBody() != null) {
            buf.writeBytes(cmd.getBody());
        }
        byte[] bytes = new byte[buf.readableBytes()];
        buf.readBytes(bytes);
        return bytes;
    }

    static RemotingCommand request(int code, CommandCustomHeader header, int opaque) {
        RemotingCommand cmd = RemotingCommand.createRequestCommand(code, header);
        cmd.setOpaque(opaque);
        cmd.setVersion(MQVersion.Version.V5_3_3.ordinal());
        return cmd;
    }

    static void frame(String name, RemotingCommand cmd, SerializeType type) throws Exception {
        cmd.setSerializeTypeCurrentRPC(type);
        byte[] bytes = wire(cmd);
        String file = "frame_" + name + "." + type.name().toLowerCase() + ".bin";
        write(file, bytes);
        // What Java's decoder makes of the same bytes (the Python decoder must agree).
        RemotingCommand back = RemotingCommand.decode(ByteBuffer.wrap(bytes, 4, bytes.length - 4).slice());
        Map<String, Object> view = new TreeMap<>();
        view.put("code", back.getCode());
        view.put("language", back.getLanguage().name());
        view.put("version", back.getVersion());
        view.put("opaque", back.getOpaque());
        view.put("flag", back.getFlag());
        view.put("remark", back.getRemark());
        view.put("ext_fields", back.getExtFields() == null ? null : new TreeMap<>(back.getExtFields()));
        view.put("body", back.getBody() == null ? "" : new String(back.getBody(), StandardCharsets.ISO_8859_1));
        view.put("serialize_type", type.name());
        manifest.put(file, view);
    }

    static void frames() throws Exception {
        for (SerializeType type : SerializeType.values()) {
            GetRouteInfoRequestHeader route = new GetRouteInfoRequestHeader();
            route.setTopic("TopicTest");
            frame("get_route", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, route, 1), type);

            PullMessageRequestHeader pull = new PullMessageRequestHeader();
            pull.setConsumerGroup("spark-group");
            pull.setTopic("TopicTest");
            pull.setQueueId(3);
            pull.setQueueOffset(1234567890123L);
            pull.setMaxMsgNums(32);
            pull.setSysFlag(2 | 4 | 16);
            pull.setCommitOffset(0L);
            pull.setSuspendTimeoutMillis(20000L);
            pull.setSubscription("TagA || TagB");
            pull.setSubVersion(0L);
            pull.setExpressionType("TAG");
            pull.setMaxMsgBytes(Integer.MAX_VALUE);
            pull.setBrokerName("broker-a");
            frame("pull", request(RequestCode.LITE_PULL_MESSAGE, pull, 7), type);

            SendMessageRequestHeader v1 = new SendMessageRequestHeader();
            v1.setProducerGroup("spark-producer");
            v1.setTopic("TopicTest");
            v1.setDefaultTopic("TBW102");
            v1.setDefaultTopicQueueNums(4);
            v1.setQueueId(1);
            v1.setSysFlag(0);
            v1.setBornTimestamp(BORN);
            v1.setFlag(0);
            v1.setProperties("UNIQ_KEY\u00017F0000010001000000000000000A\u0002WAIT\u0001true\u0002TAGS\u0001TagA\u0002");
            v1.setReconsumeTimes(0);
            v1.setUnitMode(false);
            v1.setBatch(false);
            v1.setBrokerName("broker-a");
            RemotingCommand send = request(RequestCode.SEND_MESSAGE_V2,
                SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2(v1), 8);
            send.setBody("hello \u00e9t\u00e9".getBytes(StandardCharsets.UTF_8));
            frame("send_v2", send, type);

            RemotingCommand sendV1 = request(RequestCode.SEND_MESSAGE, v1, 9);
            sendV1.setBody(new byte[] {0, 1, 2, (byte) 0xff});
            frame("send_v1", sendV1, type);

            RemotingCommand pullResp = RemotingCommand.createResponseCommand(PullMessageResponseHeader.class);
            PullMessageResponseHeader ph = (PullMessageResponseHeader) pullResp.readCustomHeader();
            ph.setNextBeginOffset(100L);
            ph.setMinOffset(0L);
            ph.setMaxOffset(100L);
            ph.setSuggestWhichBrokerId(0L);
            pullResp.setCode(ResponseCode.PULL_NOT_FOUND);
            pullResp.setRemark(null);
            pullResp.setOpaque(7);
            pullResp.setVersion(MQVersion.Version.V5_3_3.ordinal());
            frame("pull_response", pullResp, type);

            RemotingCommand sendResp = RemotingCommand.createResponseCommand(SendMessageResponseHeader.class);
            SendMessageResponseHeader sh = (SendMessageResponseHeader) sendResp.readCustomHeader();
            sh.setMsgId("7F00000100002A9F0000000000000000");
            sh.setQueueId(1);
            sh.setQueueOffset(42L);
            sh.setTransactionId("7F0000010001000000000000000A");
            sendResp.setCode(ResponseCode.SUCCESS);
            sendResp.setRemark(null);
            sendResp.setOpaque(8);
            sendResp.addExtField("MSG_REGION", "DefaultRegion");
            sendResp.addExtField("TRACE_ON", "true");
            frame("send_response", sendResp, type);

            RemotingCommand error = RemotingCommand.createResponseCommand(ResponseCode.TOPIC_NOT_EXIST,
                "No topic route info in name server for the topic: Nope\u4e2d");
            error.setOpaque(1);
            frame("error_response", error, type);

            StringBuilder odd = new StringBuilder("escapes:");
            for (char ch = 0; ch < 0x20; ch++) {
                odd.append(ch);
            }
            odd.append("\u007f \" \\ / \u2028 \u2029 \u00e9 \ud83d\ude00 <>&'");
            RemotingCommand escapes = RemotingCommand.createResponseCommand(ResponseCode.SYSTEM_ERROR, odd.toString());
            escapes.setOpaque(-5);
            escapes.addExtField("k\"ey", odd.toString());
            frame("escapes_response", escapes, type);

            UpdateConsumerOffsetRequestHeader upd = new UpdateConsumerOffsetRequestHeader();
            upd.setConsumerGroup("spark-group");
            upd.setTopic("TopicTest");
            upd.setQueueId(0);
            upd.setCommitOffset(99L);
            RemotingCommand oneway = request(RequestCode.UPDATE_CONSUMER_OFFSET, upd, 11);
            oneway.markOnewayRPC();
            frame("update_offset_oneway", oneway, type);

            RemotingCommand hb = request(RequestCode.HEART_BEAT, null, 12);
            hb.setLanguage(LanguageCode.PYTHON);
            hb.setBody("{\"clientID\":\"c1\"}".getBytes(StandardCharsets.UTF_8));
            frame("heartbeat_no_ext", hb, type);

            // ACL: AclClientRPCHook signs the ext fields after copying the custom header into them.
            RemotingCommand signed = request(RequestCode.SEND_MESSAGE_V2,
                SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2(v1), 13);
            signed.setBody("hello".getBytes(StandardCharsets.UTF_8));
            new AclClientRPCHook(new SessionCredentials("rocketmq2", "12345678")).doBeforeRequest("127.0.0.1:10911", signed);
            frame("signed_send_v2", signed, type);
        }
    }

    // ---------------------------------------------------------------- stored messages

    static MessageExt messageExt(String topic, byte[] body, Map<String, String> props, int sysFlag,
        InetSocketAddress born, InetSocketAddress store, long queueOffset, long physOffset) {
        MessageExt m = new MessageExt();
        m.setTopic(topic);
        m.setBody(body);
        for (Map.Entry<String, String> e : props.entrySet()) {
            MessageAccessor.putProperty(m, e.getKey(), e.getValue());
        }
        m.setSysFlag(sysFlag);
        m.setBornHost(born);
        m.setStoreHost(store);
        m.setBornTimestamp(BORN);
        m.setStoreTimestamp(STORE);
        m.setQueueId(2);
        m.setQueueOffset(queueOffset);
        m.setCommitLogOffset(physOffset);
        m.setFlag(5);
        m.setReconsumeTimes(1);
        m.setPreparedTransactionOffset(0L);
        m.setBodyCRC(UtilAll.crc32(body));
        return m;
    }

    static Map<String, String> props(String... kv) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    static void storedMessages() throws Exception {
        InetSocketAddress born4 = new InetSocketAddress(InetAddress.getByName("10.1.2.3"), 54321);
        InetSocketAddress store4 = new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 10911);
        InetSocketAddress born6 = new InetSocketAddress(InetAddress.getByName("fe80::1:2:3:4"), 40000);
        InetSocketAddress store6 = new InetSocketAddress(InetAddress.getByName("2001:db8::10"), 10911);

        List<byte[]> records = new ArrayList<>();
        records.add(MessageDecoder.encode(messageExt("TopicTest", "hello".getBytes(StandardCharsets.UTF_8),
            props("UNIQ_KEY", "7F000001303900000000000000000000", "WAIT", "true", "TAGS", "TagA",
                "KEYS", "k1 k2", "CLUSTER", "DefaultCluster", "__SHARDINGKEY", "group-7"),
            0, born4, store4, 0L, 0L), false));
        records.add(MessageDecoder.encode(messageExt("TopicTest", new byte[0],
            props(), 0, born4, store4, 1L, 1000L), false));
        records.add(MessageDecoder.encode(messageExt("TopicTest", "v6 \u00e9".getBytes(StandardCharsets.UTF_8),
            props("TAGS", "TagB", "TIMER_DELIVER_MS", "1700000600000", "REAL_TOPIC", "TopicTest", "REAL_QID", "2"),
            MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, born6, store6, 2L, 2000L), false));
        // A compressed body as the broker stores it: the producer's zlib (level 5) output, CRC over it.
        byte[] plain = new byte[6000];
        for (int i = 0; i < plain.length; i++) {
            plain[i] = (byte) ('a' + (i * 7 % 26));
        }
        byte[] zipped = CompressorFactory.getCompressor(CompressionType.ZLIB).compress(plain, 5);
        records.add(MessageDecoder.encode(messageExt("TopicTest", zipped,
            props("UNIQ_KEY", "7F000001303900000000000000000001", "KEYS", "big"),
            MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE, born4, store4, 3L, 3000L), false));
        write("stored_plain_body.bin", plain);

        int total = 0;
        for (byte[] r : records) {
            total += r.length;
        }
        ByteBuffer all = ByteBuffer.allocate(total);
        for (byte[] r : records) {
            all.put(r);
        }
        write("stored_messages.bin", all.array());
        manifest.put("stored_messages.bin", decodedView(all.array()));

        // MESSAGE_MAGIC_CODE_V2 (2-byte topic length) is written by the broker's MessageExtEncoder, which is
        // not on this classpath: build it from a V1 record and let MessageDecoder read it back.
        String longTopic = "%RETRY%" + "g".repeat(150);
        byte[] v1 = MessageDecoder.encode(messageExt(longTopic.substring(0, 100), "retry".getBytes(StandardCharsets.UTF_8),
            props("RETRY_TOPIC", "TopicTest", "RECONSUME_TIME", "1", "TAGS", "TagA"),
            0, born4, store4, 4L, 4000L), false);
        byte[] v2 = toV2(v1, longTopic.getBytes(StandardCharsets.UTF_8));
        write("stored_v2.bin", v2);
        manifest.put("stored_v2.bin", decodedView(v2));
    }

    /** Rewrites a V1 record (topic of any length) into V2 with the given topic. */
    static byte[] toV2(byte[] v1, byte[] topic) {
        ByteBuffer in = ByteBuffer.wrap(v1);
        int sysFlag = in.getInt(36);
        int bodyPos = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + ((sysFlag & 0x10) == 0 ? 8 : 20) + 8
            + ((sysFlag & 0x20) == 0 ? 8 : 20) + 4 + 8;
        int bodyLen = in.getInt(bodyPos);
        int topicPos = bodyPos + 4 + bodyLen;
        int oldTopicLen = v1[topicPos];
        int propsPos = topicPos + 1 + oldTopicLen;
        int rest = v1.length - propsPos;
        int size = topicPos + 2 + topic.length + rest;
        ByteBuffer outBuf = ByteBuffer.allocate(size);
        outBuf.put(v1, 0, topicPos);
        outBuf.putShort((short) topic.length);
        outBuf.put(topic);
        outBuf.put(v1, propsPos, rest);
        outBuf.putInt(0, size);
        outBuf.putInt(4, MessageDecoder.MESSAGE_MAGIC_CODE_V2);
        return outBuf.array();
    }

    static List<Object> decodedView(byte[] bytes) {
        List<Object> list = new ArrayList<>();
        for (MessageExt m : MessageDecoder.decodes(ByteBuffer.wrap(bytes), true)) {
            Map<String, Object> v = new TreeMap<>();
            v.put("topic", m.getTopic());
            v.put("queue_id", m.getQueueId());
            v.put("queue_offset", m.getQueueOffset());
            v.put("commitlog_offset", m.getCommitLogOffset());
            v.put("sysflag", m.getSysFlag());
            v.put("flag", m.getFlag());
            v.put("body_crc", m.getBodyCRC());
            v.put("born_timestamp", m.getBornTimestamp());
            v.put("store_timestamp", m.getStoreTimestamp());
            v.put("born_host", hostString((InetSocketAddress) m.getBornHost()));
            v.put("store_host", hostString((InetSocketAddress) m.getStoreHost()));
            v.put("reconsume_times", m.getReconsumeTimes());
            v.put("prepared_transaction_offset", m.getPreparedTransactionOffset());
            v.put("store_size", m.getStoreSize());
            v.put("body_hex", UtilAll.bytes2string(m.getBody() == null ? new byte[0] : m.getBody()));
            v.put("properties", m.getProperties() == null ? new TreeMap<>() : new TreeMap<>(m.getProperties()));
            v.put("msg_id", m.getMsgId());
            v.put("offset_msg_id", ((org.apache.rocketmq.common.message.MessageClientExt) m).getOffsetMsgId());
            v.put("tags", m.getTags());
            v.put("keys", m.getKeys());
            list.add(v);
        }
        return list;
    }

    /** "ip:port" with the IPv6 address bracketed, as the Python decoder formats hosts. */
    static String hostString(InetSocketAddress a) {
        String ip = a.getAddress().getHostAddress();
        return ip.contains(":") ? "[" + ip + "]:" + a.getPort() : ip + ":" + a.getPort();
    }

    // ---------------------------------------------------------------- batch

    static void batch() throws Exception {
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Message m = new Message("TopicTest", "TagA", "key" + i + " other", ("body-" + i).getBytes(StandardCharsets.UTF_8));
            m.setFlag(i);
            MessageAccessor.putProperty(m, "UNIQ_KEY", String.format("7F00000130390000000000000000%04X", i));
            msgs.add(m);
        }
        msgs.add(new Message("TopicTest", new byte[0]));
        MessageBatch batch = MessageBatch.generateFromList(msgs);
        byte[] bytes = batch.encode();
        write("batch.bin", bytes);
        List<Object> view = new ArrayList<>();
        for (Message m : MessageDecoder.decodeMessages(ByteBuffer.wrap(bytes))) {
            Map<String, Object> v = new TreeMap<>();
            v.put("flag", m.getFlag());
            v.put("body_hex", UtilAll.bytes2string(m.getBody()));
            v.put("properties", new TreeMap<>(m.getProperties()));
            view.add(v);
        }
        manifest.put("batch.bin", view);
    }

    // ---------------------------------------------------------------- ids

    static void ids() throws Exception {
        Map<String, Object> v = new TreeMap<>();
        v.put("offset_v4", MessageDecoder.createMessageId(
            new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 10911), 123456L));
        v.put("offset_v6", MessageDecoder.createMessageId(
            new InetSocketAddress(InetAddress.getByName("2001:db8::10"), 10911), 1L << 40));
        manifest.put("offset_ids", v);

        List<Object> uniq = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            String id = MessageClientIDSetter.createUniqID();
            Map<String, Object> u = new TreeMap<>();
            u.put("id", id);
            u.put("ip", MessageClientIDSetter.getIPStrFromID(id));
            u.put("pid", MessageClientIDSetter.getPidFromID(id));
            u.put("time_ms", MessageClientIDSetter.getNearlyTimeFromID(id).getTime());
            uniq.add(u);
        }
        Map<String, Object> doc = new TreeMap<>();
        doc.put("generated_at_ms", System.currentTimeMillis());
        doc.put("timezone", java.util.TimeZone.getDefault().getID());
        doc.put("ids", uniq);
        write("uniq_ids.json", json(doc).getBytes(StandardCharsets.UTF_8));
    }

    // ---------------------------------------------------------------- JSON bodies

    /** The name server's two forms of a route (RouteInfoManager + ClientRequestProcessor). */
    static void bodies() throws Exception {
        TopicRouteData route = new TopicRouteData();
        List<QueueData> qds = new ArrayList<>();
        List<BrokerData> bds = new ArrayList<>();
        for (String b : new String[] {"broker-a", "broker-b"}) {
            QueueData q = new QueueData();
            q.setBrokerName(b);
            q.setReadQueueNums(4);
            q.setWriteQueueNums(4);
            q.setPerm(6);
            q.setTopicSysFlag(0);
            qds.add(q);
            HashMap<Long, String> addrs = new HashMap<>();
            addrs.put(0L, b.equals("broker-a") ? "127.0.0.1:10911" : "127.0.0.1:10921");
            addrs.put(1L, b.equals("broker-a") ? "127.0.0.1:10915" : "127.0.0.1:10925");
            BrokerData bd = new BrokerData("DefaultCluster", b, addrs);
            bds.add(bd);
        }
        route.setQueueDatas(qds);
        route.setBrokerDatas(bds);
        route.setFilterServerTable(new HashMap<>());
        write("route_plain.json", route.encode());
        write("route_standard.json", encodeWithFeatures(route,
            "BrowserCompatible", "QuoteFieldNames", "SkipTransientField", "MapSortField"));

        ClusterInfo cluster = new ClusterInfo();
        Map<String, BrokerData> table = new HashMap<>();
        for (BrokerData bd : bds) {
            table.put(bd.getBrokerName(), bd);
        }
        cluster.setBrokerAddrTable(table);
        Map<String, Set<String>> clusters = new HashMap<>();
        clusters.put("DefaultCluster", new TreeSet<>(Arrays.asList("broker-a", "broker-b")));
        cluster.setClusterAddrTable(clusters);
        write("cluster_info.json", cluster.encode());

        TopicList topics = new TopicList();
        topics.getTopicList().add("TopicTest");
        topics.getTopicList().add("%RETRY%spark-group");
        write("topic_list.json", topics.encode());

        TopicStatsTable stats = new TopicStatsTable();
        TopicOffset to = new TopicOffset();
        to.setMinOffset(0);
        to.setMaxOffset(10);
        to.setLastUpdateTimestamp(STORE);
        stats.getOffsetTable().put(new MessageQueue("TopicTest", "broker-a", 0), to);
        write("topic_stats.json", stats.encode());

        ConsumeStats cs = new ConsumeStats();
        OffsetWrapper ow = new OffsetWrapper();
        ow.setBrokerOffset(10);
        ow.setConsumerOffset(7);
        ow.setPullOffset(8);
        ow.setLastTimestamp(STORE);
        cs.getOffsetTable().put(new MessageQueue("TopicTest", "broker-a", 1), ow);
        cs.setConsumeTps(1.5);
        write("consume_stats.json", cs.encode());
    }

    /** RemotingSerializable.encode(features...) with fastjson 1 (SerializerFeature) or 2 (JSONWriter.Feature). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static byte[] encodeWithFeatures(RemotingSerializable obj, String... names) throws Exception {
        for (Method m : RemotingSerializable.class.getMethods()) {
            if (m.getName().equals("encode") && m.getParameterCount() == 1 && m.getParameterTypes()[0].isArray()) {
                Class<?> enumType = m.getParameterTypes()[0].getComponentType();
                List<Object> picked = new ArrayList<>();
                for (String n : names) {
                    try {
                        picked.add(Enum.valueOf((Class<Enum>) enumType, n));
                    } catch (IllegalArgumentException absent) {
                        // fastjson2 has no QuoteFieldNames / SkipTransientField: the name server omits them too
                    }
                }
                Object arr = Array.newInstance(enumType, picked.size());
                for (int i = 0; i < picked.size(); i++) {
                    Array.set(arr, i, picked.get(i));
                }
                manifest.put("route_standard_features", enumType.getName() + " " + picked);
                return (byte[]) m.invoke(obj, arr);
            }
        }
        throw new IllegalStateException("no encode(features...)");
    }

    // ---------------------------------------------------------------- signatures

    static void signatures() throws Exception {
        List<Object> cases = new ArrayList<>();
        cases.add(signCase(props("topic", "TopicTest", "AccessKey", "rocketmq2"), null, "12345678"));
        cases.add(signCase(props("topic", "TopicTest", "AccessKey", "rocketmq2"), "hello", "12345678"));
        cases.add(signCase(props("b", "TopicTest", "a", "g1", "AccessKey", "ak", "SecurityToken", "tok",
            "i", "TAGS\u0001\u00e9\u0002"), "\u4e2d body", "s\u00e9cret"));
        manifest.put("signatures", cases);
    }

    static Map<String, Object> signCase(Map<String, String> fields, String body, String secret) {
        RemotingCommand cmd = RemotingCommand.createRequestCommand(RequestCode.SEND_MESSAGE_V2, null);
        for (Map.Entry<String, String> e : fields.entrySet()) {
            cmd.addExtField(e.getKey(), e.getValue());
        }
        byte[] b = body == null ? null : body.getBytes(StandardCharsets.UTF_8);
        cmd.setBody(b);
        byte[] content = AclUtils.combineRequestContent(cmd, new TreeMap<>(cmd.getExtFields()));
        Map<String, Object> c = new TreeMap<>();
        c.put("ext_fields", new TreeMap<>(fields));
        c.put("body", body);
        c.put("secret", secret);
        c.put("signature", AclUtils.calSignature(content, secret));
        return c;
    }

    // ---------------------------------------------------------------- helpers

    static void write(String name, byte[] bytes) throws IOException {
        Files.write(out.resolve(name), bytes);
    }

    static String json(Object o) {
        StringBuilder sb = new StringBuilder();
        json(o, sb, "");
        sb.append('\n');
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    static void json(Object o, StringBuilder sb, String indent) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof String) {
            sb.append('"');
            for (char ch : ((String) o).toCharArray()) {
                if (ch == '"' || ch == '\\') {
                    sb.append('\\').append(ch);
                } else if (ch < 0x20 || ch > 0x7e) {
                    sb.append(String.format("\\u%04x", (int) ch));
                } else {
                    sb.append(ch);
                }
            }
            sb.append('"');
        } else if (o instanceof Number || o instanceof Boolean) {
            sb.append(o);
        } else if (o instanceof Map) {
            sb.append("{");
            String inner = indent + "  ";
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) o).entrySet()) {
                sb.append(first ? "\n" : ",\n").append(inner);
                json(e.getKey(), sb, inner);
                sb.append(": ");
                json(e.getValue(), sb, inner);
                first = false;
            }
            sb.append(first ? "}" : "\n" + indent + "}");
        } else if (o instanceof List) {
            sb.append("[");
            String inner = indent + "  ";
            boolean first = true;
            for (Object e : (List<Object>) o) {
                sb.append(first ? "\n" : ",\n").append(inner);
                json(e, sb, inner);
                first = false;
            }
            sb.append(first ? "]" : "\n" + indent + "]");
        } else {
            json(o.toString(), sb, indent);
        }
    }
}
