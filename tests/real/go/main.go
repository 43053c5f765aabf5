// Command gorocketmq drives Apache's Go client (github.com/apache/rocketmq-client-go/v2) against a
// RocketMQ name server: it produces single, batch and orderly (queue selector by sharding key) messages
// with tags, keys and properties, reads them back with a push consumer and a pull consumer, each in a
// group of its own, and prints one JSON line: what was sent, what each consumer got, the errors.
//
//	gorocketmq -n 127.0.0.1:9876 -t TOPIC -g GROUP [-single 20] [-batch 16] [-batch-size 8]
//	           [-orderly 12] [-groups 3] [-consumers push,pull] [-timeout 60]
//
// Message i has body "body-i", tag "Tag" + "ABC"[i%3], key "k-i" and property index=i (the Java drivers'
// convention, tests/real/java/Produce.java); orderly messages also carry group=g-(i%groups), their
// sharding key. A consumer stops once it has seen every (broker, queue, offset) sent and then one quiet
// period with nothing new (so extra deliveries show), or at the timeout; its group's offsets are
// committed when it shuts down.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

type sent struct {
	I           int    `json:"i"`
	Mode        string `json:"mode"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
	Broker      string `json:"broker"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	Status      int    `json:"status"`
	Group       string `json:"group,omitempty"`
}

type got struct {
	MsgID          string            `json:"msgId"`
	Topic          string            `json:"topic"`
	Broker         string            `json:"broker"`
	QueueID        int               `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	Body           string            `json:"body"`
	Tags           string            `json:"tags"`
	Keys           string            `json:"keys"`
	Properties     map[string]string `json:"properties"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
}

type consumed struct {
	Group    string `json:"group"`
	Messages []got  `json:"messages"`
	Distinct int    `json:"distinct"`
	Complete bool   `json:"complete"`
	Millis   int64  `json:"millis"`
}

type result struct {
	Sent      []sent               `json:"sent"`
	Consumers map[string]*consumed `json:"consumers"`
	Errors    []string             `json:"errors"`
	Millis    int64                `json:"millis"`
}

var (
	namesrv   = flag.String("n", "127.0.0.1:9876", "name server address")
	topic     = flag.String("t", "", "topic")
	group     = flag.String("g", "", "consumer group (the pull consumer's is GROUP-pull)")
	nSingle   = flag.Int("single", 20, "messages sent one by one")
	nBatch    = flag.Int("batch", 16, "messages sent in batches")
	batchSize = flag.Int("batch-size", 8, "messages per batch")
	nOrderly  = flag.Int("orderly", 12, "messages sent with a sharding key through the hash queue selector")
	nGroups   = flag.Int("groups", 3, "sharding keys of the orderly messages")
	consumers = flag.String("consumers", "push,pull", "consumers to run in turn: push, pull")
	timeoutS  = flag.Int("timeout", 60, "seconds each consumer may take")
	quiet     = flag.Duration("quiet", 1500*time.Millisecond, "quiet period after everything was seen")
	settle    = flag.Duration("settle", 500*time.Millisecond, "wait after committing offsets, before shutdown")
	commit    = flag.Bool("commit-first", true, "commit offsets and wait -settle before Shutdown (false: Shutdown's own commit only)")
)

var (
	mu  sync.Mutex
	res = result{Consumers: map[string]*consumed{}, Errors: []string{}, Sent: []sent{}}
)

func fail(format string, a ...interface{}) {
	mu.Lock()
	res.Errors = append(res.Errors, fmt.Sprintf(format, a...))
	mu.Unlock()
}

func message(i int, mode string) *primitive.Message {
	m := primitive.NewMessage(*topic, []byte(fmt.Sprintf("body-%d", i)))
	m.WithTag("Tag" + string("ABC"[i%3]))
	m.WithKeys([]string{fmt.Sprintf("k-%d", i)})
	m.WithProperty("index", strconv.Itoa(i))
	m.WithProperty("mode", mode)
	return m
}

func record(mode string, first int, r *primitive.SendResult, n int, grp string) {
	// MsgID: the client's UNIQ_KEYs (a batch's messages get none: ""); OffsetMsgID: the broker's ids.
	ids := strings.Split(r.MsgID, ",")
	offsetIds := strings.Split(r.OffsetMsgID, ",")
	if len(offsetIds) != n {
		fail("%s send at %d: %d offset message ids for %d messages (%q)", mode, first, len(offsetIds), n, r.OffsetMsgID)
	}
	for k := 0; k < n; k++ {
		s := sent{I: first + k, Mode: mode, Status: int(r.Status), Group: grp,
			Broker: r.MessageQueue.BrokerName, QueueID: r.MessageQueue.QueueId, QueueOffset: r.QueueOffset + int64(k)}
		if k < len(ids) {
			s.MsgID = ids[k]
		}
		if k < len(offsetIds) {
			s.OffsetMsgID = offsetIds[k]
		}
		res.Sent = append(res.Sent, s)
	}
}

func newProducer(name string, opts ...producer.Option) rocketmq.Producer {
	opts = append([]producer.Option{
		producer.WithNameServer([]string{*namesrv}),
		producer.WithGroupName(name),
		producer.WithInstanceName(name),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10 * time.Second),
	}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		fail("new producer %s: %v", name, err)
		return nil
	}
	if err := p.Start(); err != nil {
		fail("start producer %s: %v", name, err)
		return nil
	}
	return p
}

func produce() {
	ctx := context.Background()
	i := 0
	if p := newProducer("go-producer"); p != nil {
		for k := 0; k < *nSingle; k++ {
			r, err := p.SendSync(ctx, message(i, "single"))
			if err != nil {
				fail("single send %d: %v", i, err)
			} else {
				record("single", i, r, 1, "")
			}
			i++
		}
		for k := 0; k < *nBatch; k += *batchSize {
			n := *batchSize
			if k+n > *nBatch {
				n = *nBatch - k
			}
			msgs := make([]*primitive.Message, n)
			for j := range msgs {
				msgs[j] = message(i+j, "batch")
			}
			r, err := p.SendSync(ctx, msgs...)
			if err != nil {
				fail("batch send %d..%d: %v", i, i+n-1, err)
			} else {
				record("batch", i, r, n, "")
			}
			i += n
		}
		_ = p.Shutdown()
	}
	if *nOrderly == 0 {
		return
	}
	if p := newProducer("go-producer-orderly", producer.WithQueueSelector(producer.NewHashQueueSelector())); p != nil {
		for k := 0; k < *nOrderly; k++ {
			grp := fmt.Sprintf("g-%d", k%*nGroups)
			m := message(i, "orderly")
			m.WithShardingKey(grp)
			m.WithProperty("group", grp)
			r, err := p.SendSync(ctx, m)
			if err != nil {
				fail("orderly send %d: %v", i, err)
			} else {
				record("orderly", i, r, 1, grp)
			}
			i++
		}
		_ = p.Shutdown()
	}
}

func key(m *primitive.MessageExt) string {
	return fmt.Sprintf("%s/%d/%d", m.Queue.BrokerName, m.Queue.QueueId, m.QueueOffset)
}

func toGot(m *primitive.MessageExt) got {
	props := map[string]string{}
	for k, v := range m.GetProperties() {
		props[k] = v
	}
	broker := ""
	qid := -1
	if m.Queue != nil {
		broker, qid = m.Queue.BrokerName, m.Queue.QueueId
	}
	return got{MsgID: m.MsgId, Topic: m.Topic, Broker: broker, QueueID: qid, QueueOffset: m.QueueOffset,
		Body: base64.StdEncoding.EncodeToString(m.Body), Tags: m.GetTags(), Keys: m.GetKeys(), Properties: props,
		ReconsumeTimes: m.ReconsumeTimes, BornTimestamp: m.BornTimestamp, StoreTimestamp: m.StoreTimestamp}
}

// collector gathers a consumer's deliveries and says when it is done.
type collector struct {
	mu       sync.Mutex
	out      *consumed
	expected map[string]bool
	seen     map[string]bool
	last     time.Time
}

func newCollector(g string) *collector {
	c := &collector{out: &consumed{Group: g, Messages: []got{}}, expected: map[string]bool{}, seen: map[string]bool{}}
	for _, s := range res.Sent {
		c.expected[fmt.Sprintf("%s/%d/%d", s.Broker, s.QueueID, s.QueueOffset)] = true
	}
	return c
}

func (c *collector) add(msgs []*primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.out.Messages = append(c.out.Messages, toGot(m))
		c.seen[key(m)] = true
	}
	c.last = time.Now()
}

func (c *collector) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.expected {
		if !c.seen[k] {
			return false
		}
	}
	return time.Since(c.last) >= *quiet
}

func (c *collector) finish(t0 time.Time, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Distinct = len(c.seen)
	c.out.Complete = complete
	c.out.Millis = time.Since(t0).Milliseconds()
}

func consumerOptions(g string) []consumer.Option {
	return []consumer.Option{
		consumer.WithNameServer([]string{*namesrv}),
		consumer.WithGroupName(g),
		consumer.WithInstance(g),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithPullBatchSize(32),
	}
}

func wait(c *collector, t0 time.Time) bool {
	deadline := t0.Add(time.Duration(*timeoutS) * time.Second)
	for time.Now().Before(deadline) {
		if c.done() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func runPush(g string) {
	t0 := time.Now()
	c := newCollector(g)
	res.Consumers["push"] = c.out
	pc, err := rocketmq.NewPushConsumer(consumerOptions(g)...)
	if err != nil {
		fail("new push consumer: %v", err)
		return
	}
	err = pc.Subscribe(*topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			c.add(msgs)
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail("push subscribe: %v", err)
		return
	}
	if err := pc.Start(); err != nil {
		fail("push start: %v", err)
		return
	}
	complete := wait(c, t0)
	// Commit the group's offsets while the connection is up, then give the broker a moment to read them:
	// they go oneway, and Shutdown (which sends them again) closes the connection at once, so some of
	// Shutdown's are lost, by real brokers as by the emulator (tests/real/test_real_go_client.py).
	if p, ok := pc.(interface{ PersistConsumerOffset() error }); ok && *commit {
		if err := p.PersistConsumerOffset(); err != nil {
			fail("push persist offset: %v", err)
		}
		time.Sleep(*settle)
	}
	if err := pc.Shutdown(); err != nil {
		fail("push shutdown: %v", err)
	}
	c.finish(t0, complete)
}

func runPull(g string) {
	t0 := time.Now()
	c := newCollector(g)
	res.Consumers["pull"] = c.out
	pc, err := rocketmq.NewPullConsumer(consumerOptions(g)...)
	if err != nil {
		fail("new pull consumer: %v", err)
		return
	}
	if err := pc.Subscribe(*topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		fail("pull subscribe: %v", err)
		return
	}
	if err := pc.Start(); err != nil {
		fail("pull start: %v", err)
		return
	}
	deadline := t0.Add(time.Duration(*timeoutS) * time.Second)
	complete := false
	for time.Now().Before(deadline) {
		cr, err := pc.Poll(context.Background(), 500*time.Millisecond)
		if err == nil {
			c.add(cr.GetMsgList())
			pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		} else if !consumer.IsNoNewMsgError(err) {
			fail("pull poll: %v", err)
			time.Sleep(200 * time.Millisecond)
		}
		if c.done() {
			complete = true
			break
		}
	}
	if *commit {
		if err := pc.PersistOffset(context.Background(), *topic); err != nil {
			fail("pull persist offset: %v", err)
		}
		time.Sleep(*settle) // as in runPush
	}
	if err := pc.Shutdown(); err != nil {
		fail("pull shutdown: %v", err)
	}
	c.finish(t0, complete)
}

func main() {
	flag.Parse()
	if *topic == "" || *group == "" {
		fmt.Fprintln(os.Stderr, "usage: gorocketmq -n NAMESRV -t TOPIC -g GROUP [flags]")
		os.Exit(2)
	}
	rlog.SetLogLevel("warn")
	t0 := time.Now()
	produce()
	for _, k := range strings.Split(*consumers, ",") {
		switch strings.TrimSpace(k) {
		case "push":
			runPush(*group)
		case "pull":
			runPull(*group + "-pull")
		case "":
		default:
			fail("unknown consumer %q", k)
		}
	}
	res.Millis = time.Since(t0).Milliseconds()
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
}
