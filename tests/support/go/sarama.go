package main

// IBM/sarama scenarios (sarama-produce, sarama-groups, sarama-admin, sarama-transactions): the
// same records and result shapes as franz-go's, on the PLAINTEXT listener. Sarama speaks the
// protocol versions of the Kafka release it is configured for: Args.SaramaVersion ("" is
// sarama's default, 2.8).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var saramaCodecs = map[string]sarama.CompressionCodec{"none": sarama.CompressionNone,
	"gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
	"zstd": sarama.CompressionZSTD}

func saramaConfig(a Args) *sarama.Config {
	config := sarama.NewConfig()
	config.ClientID = "vdl-sarama"
	if a.SaramaVersion != "" {
		version, err := sarama.ParseKafkaVersion(a.SaramaVersion)
		must(err)
		config.Version = version
	}
	config.Metadata.Retry.Backoff = 100 * time.Millisecond
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Idempotent = true
	config.Producer.Retry.Max = 20
	config.Producer.Retry.Backoff = 100 * time.Millisecond
	config.Net.MaxOpenRequests = 1 // the idempotent producer's requirement
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.MaxWaitTime = 100 * time.Millisecond
	config.Consumer.Group.Session.Timeout = 10 * time.Second
	config.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	config.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	config.Consumer.Offsets.AutoCommit.Enable = false
	// The default (range, per topic) gives every one-partition stream to the same member.
	config.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	return config
}

func saramaMessage(topic string, i int, base int64) *sarama.ProducerMessage {
	r := makeRecord(topic, i, base)
	m := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(r.Value), Timestamp: r.Timestamp}
	if r.Key != nil {
		m.Key = sarama.ByteEncoder(r.Key)
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	return m
}

func saramaRec(m *sarama.ConsumerMessage) Rec {
	var key *string
	if m.Key != nil {
		k := string(m.Key)
		key = &k
	}
	headers := [][]string{}
	for _, h := range m.Headers {
		headers = append(headers, []string{string(h.Key), string(h.Value)})
	}
	return Rec{m.Topic, m.Offset, key, string(m.Value), headers, m.Timestamp.UnixMilli()}
}

func saramaAdmin(a Args) sarama.ClusterAdmin {
	adm, err := sarama.NewClusterAdmin(a.Bootstrap, saramaConfig(a))
	must(err)
	return adm
}

func saramaCreate(a Args, adm sarama.ClusterAdmin, topics ...string) {
	for _, t := range topics {
		must(adm.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: a.Replication}, false))
	}
}

// saramaRead reads `count` records of each topic from its start with a partition consumer.
func saramaRead(a Args, count int, committed bool, topics ...string) []Rec {
	config := saramaConfig(a)
	if committed {
		config.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	consumer, err := sarama.NewConsumer(a.Bootstrap, config)
	must(err)
	defer consumer.Close()
	got := []Rec{}
	for _, t := range topics {
		pc, err := consumer.ConsumePartition(t, 0, sarama.OffsetOldest)
		must(err)
		timeout := time.After(60 * time.Second)
		for n := 0; n < count; n++ {
			select {
			case m := <-pc.Messages():
				got = append(got, saramaRec(m))
			case e := <-pc.Errors():
				fail(e)
			case <-timeout:
				fail(fmt.Errorf("read %d of %d records from %s before the deadline", n, count, t))
			}
		}
		must(pc.Close())
	}
	return got
}

// sarama-produce: a stream per codec, `count` records each from an idempotent acks=all sync
// producer (the offsets it was told), then read back from the start.
func saramaProduce(a Args) {
	adm := saramaAdmin(a)
	saramaCreate(a, adm, a.Topics...)
	must(adm.Close())
	acked := map[string][]int64{}
	records := map[string][]Rec{}
	for i, codec := range a.Codecs {
		config := saramaConfig(a)
		config.Producer.Compression = saramaCodecs[codec]
		producer, err := sarama.NewSyncProducer(a.Bootstrap, config)
		must(err)
		var messages []*sarama.ProducerMessage
		for j := 0; j < a.Count; j++ {
			messages = append(messages, saramaMessage(a.Topics[i], j, a.BaseMillis))
		}
		must(producer.SendMessages(messages))
		for _, m := range messages {
			acked[codec] = append(acked[codec], m.Offset)
		}
		must(producer.Close())
		records[codec] = saramaRead(a, a.Count, false, a.Topics[i])
	}
	emit("result", map[string]any{"acked": acked, "records": records})
}

// saramaMember is one member of a consumer group: Consume in a loop, every record kept and its
// offset committed at once; `claims` is what its current session holds.
type saramaMember struct {
	group  sarama.ConsumerGroup
	mu     sync.Mutex
	claims []string
	got    []Rec
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = []string{}
	for t := range s.Claims() {
		m.claims = append(m.claims, t)
	}
	sort.Strings(m.claims)
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = []string{}
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		m.got = append(m.got, saramaRec(msg))
		m.mu.Unlock()
		s.MarkMessage(msg, "")
		s.Commit()
	}
	return nil
}

func (m *saramaMember) state() ([]string, []Rec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string{}, m.claims...), append([]Rec{}, m.got...)
}

func startMember(a Args) *saramaMember {
	group, err := sarama.NewConsumerGroup(a.Bootstrap, a.Group, saramaConfig(a))
	must(err)
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{group: group, cancel: cancel, done: make(chan struct{}), claims: []string{}}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := group.Consume(ctx, a.Topics, m); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				emit("progress", "consume: "+err.Error())
			}
		}
	}()
	return m
}

func (m *saramaMember) stop() {
	m.cancel()
	<-m.done
	must(m.group.Close())
}

func waitFor(what string, done func() bool) {
	for stop := time.Now().Add(60 * time.Second); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(stop) {
			fail(fmt.Errorf("%s: not done before the deadline", what))
		}
	}
}

// sarama-groups: as franz-go's groups scenario, with sarama's ConsumerGroup (classic protocol,
// round robin).
func saramaGroups(a Args) {
	adm := saramaAdmin(a)
	defer adm.Close()
	saramaCreate(a, adm, a.Topics...)
	producer, err := sarama.NewSyncProducer(a.Bootstrap, saramaConfig(a))
	must(err)
	produceEach := func(from, to int) {
		var messages []*sarama.ProducerMessage
		for _, t := range a.Topics {
			for i := from; i < to; i++ {
				messages = append(messages, saramaMessage(t, i, a.BaseMillis))
			}
		}
		must(producer.SendMessages(messages))
	}
	produceEach(0, a.Count)
	first := startMember(a)
	waitFor("first member", func() bool { _, got := first.state(); return len(got) >= len(a.Topics)*a.Count })
	first.stop()
	_, firstGot := first.state()

	two := []*saramaMember{startMember(a), startMember(a)}
	waitFor("two members assigned", func() bool {
		mine, _ := two[0].state()
		theirs, _ := two[1].state()
		return len(mine) > 0 && len(theirs) > 0 && len(mine)+len(theirs) == len(a.Topics)
	})
	assigned := [][]string{}
	early := [][]Rec{}
	for _, m := range two {
		claims, got := m.state()
		assigned = append(assigned, claims)
		early = append(early, got)
	}
	produceEach(a.Count, a.Count+4)
	waitFor("two members", func() bool {
		_, mine := two[0].state()
		_, theirs := two[1].state()
		return len(mine)+len(theirs) >= 4*len(a.Topics)
	})
	twoRead := []map[string][]int64{}
	for _, m := range two {
		_, got := m.state()
		twoRead = append(twoRead, offsetsOf(got))
	}
	described, err := adm.DescribeConsumerGroups([]string{a.Group})
	must(err)
	two[1].stop()
	waitFor("the other member left", func() bool { claims, _ := two[0].state(); return len(claims) == len(a.Topics) })
	_, before := two[0].state()
	produceEach(a.Count+4, a.Count+5)
	waitFor("one member", func() bool { _, got := two[0].state(); return len(got)-len(before) >= len(a.Topics) })
	_, after := two[0].state()
	two[0].stop()
	must(producer.Close())
	offsets, err := adm.ListConsumerGroupOffsets(a.Group, nil)
	must(err)
	committed := map[string]int64{}
	for topic, partitions := range offsets.Blocks {
		committed[topic] = partitions[0].Offset
	}
	emit("result", map[string]any{
		"first_read": offsetsOf(firstGot), "early": early, "two_assigned": assigned, "two_read": twoRead,
		"last_read": offsetsOf(after[len(before):]), "committed": committed,
		"described": map[string]any{"state": described[0].State, "members": len(described[0].Members),
			"protocol_type": described[0].ProtocolType, "protocol": described[0].Protocol},
	})
}

// sarama-admin: create (twice), describe configs, delete (twice), a group's offsets.
func saramaAdminScenario(a Args) {
	adm := saramaAdmin(a)
	defer adm.Close()
	out := map[string]any{}
	topic := a.Topics[0]
	retention := "86400000"
	out["created"] = errName(adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: a.Replication,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false))
	out["created_again"] = errName(adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1,
		ReplicationFactor: a.Replication}, false))
	out["created_bad_partitions"] = errName(adm.CreateTopic(topic+"-3", &sarama.TopicDetail{NumPartitions: 3,
		ReplicationFactor: a.Replication}, false))
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	must(err)
	configs := map[string]string{}
	for _, e := range entries {
		if e.Name == "retention.ms" || e.Name == "segment.ms" {
			configs[e.Name] = fmt.Sprintf("%s/%s", e.Value, e.Source)
		}
	}
	out["configs"] = configs
	offsets, err := adm.ListConsumerGroupOffsets(a.Group, map[string][]int32{topic: {0}})
	must(err)
	out["group_offset"] = offsets.Blocks[topic][0].Offset
	out["deleted"] = errName(adm.DeleteTopic(topic))
	out["deleted_again"] = errName(adm.DeleteTopic(topic))
	emit("result", out)
}

func errName(err error) string {
	if err == nil {
		return "OK"
	}
	var te *sarama.TopicError
	if errors.As(err, &te) {
		return te.Err.Error()
	}
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		return kerr.Error()
	}
	return err.Error()
}

// sarama-transactions: committed, aborted, committed again; read_committed and read_uncommitted.
func saramaTransactions(a Args) {
	adm := saramaAdmin(a)
	saramaCreate(a, adm, a.Topics[0])
	must(adm.Close())
	config := saramaConfig(a)
	config.Producer.Transaction.ID = a.TxnID
	producer, err := sarama.NewSyncProducer(a.Bootstrap, config)
	must(err)
	n := 0
	for _, step := range []struct {
		count  int
		commit bool
	}{{3, true}, {2, false}, {1, true}} {
		must(producer.BeginTxn())
		var messages []*sarama.ProducerMessage
		for i := 0; i < step.count; i++ {
			messages = append(messages, saramaMessage(a.Topics[0], n, a.BaseMillis))
			n++
		}
		must(producer.SendMessages(messages))
		if step.commit {
			must(producer.CommitTxn())
		} else {
			must(producer.AbortTxn())
		}
	}
	must(producer.Close())
	emit("result", map[string]any{"read_committed": saramaRead(a, 4, true, a.Topics[0]),
		"read_uncommitted": saramaRead(a, 6, false, a.Topics[0])})
}

// sarama-kill-leader: an idempotent sync producer of `count` records in sends of 10; after
// `pause_at` acked, a pause for the test to kill the stream's leader; then all read back.
func saramaKillLeader(a Args) {
	adm := saramaAdmin(a)
	saramaCreate(a, adm, a.Topics[0])
	must(adm.Close())
	producer, err := sarama.NewSyncProducer(a.Bootstrap, saramaConfig(a))
	must(err)
	for i := 0; i < a.Count; i += 10 {
		var messages []*sarama.ProducerMessage
		for j := i; j < i+10; j++ {
			messages = append(messages, saramaMessage(a.Topics[0], j, a.BaseMillis))
		}
		must(producer.SendMessages(messages))
		if i+10 == a.PauseAt {
			pause(a.PauseAt)
		}
	}
	must(producer.Close())
	emit("result", map[string]any{"records": saramaRead(a, a.Count, false, a.Topics[0])})
}
