// vdl-franz: franz-go (kgo + kadm), IBM/sarama and segmentio/kafka-go driven by tests/integration/test_go_clients.py.
//
// Usage: vdl-franz SCENARIO 'JSON-ARGS'. One scenario per run; progress lines ({"progress": ...})
// and then one result line ({"result": ...}) as JSON on stdout, or {"error": "..."} and exit 1.
// The Python test asserts the result exactly, so everything printed is deterministic: offsets,
// keys, values, headers and timestamps as the broker returned them, sorted where order is free.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Args are the scenario's inputs; each scenario reads the fields it needs.
type Args struct {
	Bootstrap   []string `json:"bootstrap"`
	User        string   `json:"user"`     // SCRAM-SHA-512 over TLS when set
	Password    string   `json:"password"` //
	CA          string   `json:"ca"`       // the CA's PEM file for TLS
	Topics      []string `json:"topics"`
	Codecs      []string `json:"codecs"`
	Count       int      `json:"count"`
	Replication int16    `json:"replication"`
	Group       string   `json:"group"`
	Protocol    string   `json:"protocol"` // consumer groups: "classic" or "consumer" (KIP-848)
	TxnID       string   `json:"txn_id"`
	BaseMillis  int64    `json:"base_millis"`
	PauseAt     int      `json:"pause_at"` // kill-leader: records acked before the test's kill
	Regex       string   `json:"regex"`
	// sarama's protocol versions: a Kafka release ("4.0.0"); "" is sarama's default (2.8).
	SaramaVersion string `json:"sarama_version"`
}

// Rec is a record as the tests compare it.
type Rec struct {
	Topic     string     `json:"topic"`
	Offset    int64      `json:"offset"`
	Key       *string    `json:"key"`
	Value     string     `json:"value"`
	Headers   [][]string `json:"headers"`
	Timestamp int64      `json:"timestamp"`
}

func emit(kind string, v any) {
	line, err := json.Marshal(map[string]any{kind: v})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(line))
}

func fail(err error) {
	emit("error", err.Error())
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fail(err)
	}
}

func (a Args) opts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(a.Bootstrap...), kgo.ClientID("vdl-franz"),
		kgo.RetryTimeout(30 * time.Second)}
	if a.User != "" {
		pem, err := os.ReadFile(a.CA)
		must(err)
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail(fmt.Errorf("no certificate in %s", a.CA))
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
			kgo.SASL(scram.Auth{User: a.User, Pass: a.Password}.AsSha512Mechanism()))
	}
	return append(opts, extra...)
}

func (a Args) client(extra ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(a.opts(extra...)...)
	must(err)
	return cl
}

func deadline(seconds int) context.Context {
	ctx, _ := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second) //nolint:govet
	return ctx
}

func toRec(r *kgo.Record) Rec {
	var key *string
	if r.Key != nil {
		k := string(r.Key)
		key = &k
	}
	headers := [][]string{}
	for _, h := range r.Headers {
		headers = append(headers, []string{h.Key, string(h.Value)})
	}
	return Rec{r.Topic, r.Offset, key, string(r.Value), headers, r.Timestamp.UnixMilli()}
}

// record i of a scenario: every third without a key, two headers, a timestamp base+i.
func makeRecord(topic string, i int, base int64) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%7))),
		Headers:   []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}, {Key: "empty", Value: []byte{}}},
		Timestamp: time.UnixMilli(base + int64(i))}
	if i%3 != 0 {
		r.Key = []byte(fmt.Sprintf("key-%d", i))
	}
	return r
}

func createTopics(a Args, adm *kadm.Client, topics ...string) {
	resp, err := adm.CreateTopics(deadline(30), 1, a.Replication, nil, topics...)
	must(err)
	for _, t := range resp.Sorted() {
		if t.Err != nil {
			fail(fmt.Errorf("create %s: %w", t.Topic, t.Err))
		}
	}
}

// readAll reads `count` records from the start of each topic (no group), read_committed or not.
func readAll(a Args, count int, committed bool, topics ...string) []Rec {
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl := a.client(kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level))
	defer cl.Close()
	got := []Rec{}
	ctx := deadline(60)
	for len(got) < count {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fail(fmt.Errorf("read %d of %d records from %v before the deadline", len(got), count, topics))
		}
		for _, e := range fetches.Errors() {
			fail(fmt.Errorf("fetch %s: %w", e.Topic, e.Err))
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, toRec(r)) })
	}
	sort.SliceStable(got, func(i, j int) bool { return got[i].Topic < got[j].Topic })
	return got
}

var codecs = map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}

// produce: a stream per codec (topics[i] for codecs[i]), `count` records each from an idempotent
// acks=all producer, then read back from the start.
func produce(a Args) {
	adm := kadm.NewClient(a.client())
	createTopics(a, adm, a.Topics...)
	acked := map[string][]int64{}
	for i, codec := range a.Codecs {
		topic := a.Topics[i]
		cl := a.client(kgo.ProducerBatchCompression(codecs[codec]), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(5*time.Millisecond))
		records := make([]*kgo.Record, a.Count)
		for j := range records {
			records[j] = makeRecord(topic, j, a.BaseMillis)
		}
		results := cl.ProduceSync(deadline(60), records...)
		must(results.FirstErr())
		for _, r := range results {
			acked[codec] = append(acked[codec], r.Record.Offset)
		}
		cl.Close()
	}
	records := map[string][]Rec{}
	for i, codec := range a.Codecs {
		records[codec] = readAll(a, a.Count, false, a.Topics[i])
	}
	adm.Close()
	emit("result", map[string]any{"acked": acked, "records": records})
}

// killLeader: an idempotent producer of `count` records; after the first `pause_at` are acked,
// a progress line and a wait for a line on stdin (the test kills the stream's leader then), the
// rest 20 in flight; then every record read back.
func killLeader(a Args) {
	topic := a.Topics[0]
	adm := kadm.NewClient(a.client())
	createTopics(a, adm, topic)
	adm.Close()
	cl := a.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(20),
		kgo.RecordDeliveryTimeout(60*time.Second))
	var first []*kgo.Record
	for i := 0; i < a.PauseAt; i++ {
		first = append(first, makeRecord(topic, i, a.BaseMillis))
	}
	must(cl.ProduceSync(deadline(30), first...).FirstErr())
	pause(a.PauseAt)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for i := a.PauseAt; i < a.Count; i++ {
		wg.Add(1)
		cl.Produce(context.Background(), makeRecord(topic, i, a.BaseMillis), func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	must(firstErr)
	cl.Close()
	emit("result", map[string]any{"records": readAll(a, a.Count, false, topic)})
}

// pause tells the test how many records are acked and waits for its go-ahead (a line on stdin).
func pause(acked int) {
	emit("progress", acked)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail(fmt.Errorf("waiting for the test's go-ahead: %w", err))
	}
}

// assignment tracks what the group gave a member (franz-go tells through callbacks).
type assignment struct {
	mu     sync.Mutex
	topics map[string]bool
}

func (as *assignment) opts() []kgo.Opt {
	as.topics = map[string]bool{}
	set := func(on bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			as.mu.Lock()
			defer as.mu.Unlock()
			for t := range m {
				if on {
					as.topics[t] = true
				} else {
					delete(as.topics, t)
				}
			}
		}
	}
	return []kgo.Opt{kgo.OnPartitionsAssigned(set(true)), kgo.OnPartitionsRevoked(set(false)),
		kgo.OnPartitionsLost(set(false))}
}

func (as *assignment) sorted() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	mine := []string{}
	for t := range as.topics {
		mine = append(mine, t)
	}
	sort.Strings(mine)
	return mine
}

func groupOpts(a Args, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.ConsumerGroup(a.Group), kgo.ConsumeTopics(a.Topics...), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond)}
	if a.Protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	return append(opts, extra...)
}

// pollUntil polls the members in turn until `done` says so; records go to the member's list.
func pollUntil(what string, members []*kgo.Client, got [][]Rec, done func() bool) {
	ctx := deadline(60)
	for !done() {
		if ctx.Err() != nil {
			fail(fmt.Errorf("%s: not done before the deadline", what))
		}
		for m, cl := range members {
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fetches := cl.PollFetches(short)
			cancel()
			for _, e := range fetches.Errors() {
				if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
					fail(fmt.Errorf("%s: fetch %s: %w", what, e.Topic, e.Err))
				}
			}
			fetches.EachRecord(func(r *kgo.Record) { got[m] = append(got[m], toRec(r)) })
		}
	}
}

func offsetsOf(recs []Rec) map[string][]int64 {
	out := map[string][]int64{}
	for _, r := range recs {
		out[r.Topic] = append(out[r.Topic], r.Offset)
	}
	return out
}

// groups: `count` records in each stream. One member reads them all, commits `count` for each
// stream and leaves; two members join (reset: the start, so only the commit keeps them from
// reading it all again) and split the streams; four records more per stream, each read once by
// the member it belongs to; one member leaves and the other takes every stream and its next record.
func groups(a Args) {
	adm := kadm.NewClient(a.client())
	defer adm.Close()
	createTopics(a, adm, a.Topics...)
	producer := a.client()
	produceEach := func(from, to int) {
		var records []*kgo.Record
		for _, t := range a.Topics {
			for i := from; i < to; i++ {
				records = append(records, makeRecord(t, i, a.BaseMillis))
			}
		}
		must(producer.ProduceSync(deadline(30), records...).FirstErr())
	}
	produceEach(0, a.Count)

	first := a.client(groupOpts(a)...)
	got := [][]Rec{{}}
	pollUntil("first member", []*kgo.Client{first}, got, func() bool { return len(got[0]) >= len(a.Topics)*a.Count })
	commit := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range a.Topics {
		commit[t] = map[int32]kgo.EpochOffset{0: {Epoch: -1, Offset: int64(a.Count)}}
	}
	var commitErr error
	first.CommitOffsetsSync(deadline(30), commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest,
		resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = commitError(resp, err)
	})
	must(commitErr)
	firstRead := offsetsOf(got[0])
	first.Close() // leaves the group

	as := []*assignment{{}, {}}
	two := []*kgo.Client{a.client(groupOpts(a, as[0].opts()...)...), a.client(groupOpts(a, as[1].opts()...)...)}
	got = [][]Rec{{}, {}}
	pollUntil("two members assigned", two, got, func() bool {
		mine, theirs := as[0].sorted(), as[1].sorted()
		return len(mine) > 0 && len(theirs) > 0 && len(mine)+len(theirs) == len(a.Topics)
	})
	early := [][]Rec{got[0], got[1]} // nothing: the group resumes at the commit
	assigned := [][]string{as[0].sorted(), as[1].sorted()}
	produceEach(a.Count, a.Count+4)
	got = [][]Rec{{}, {}}
	pollUntil("two members", two, got, func() bool { return len(got[0])+len(got[1]) >= 4*len(a.Topics) })
	twoRead := []map[string][]int64{offsetsOf(got[0]), offsetsOf(got[1])}
	for _, cl := range two {
		must(cl.CommitUncommittedOffsets(deadline(30)))
	}
	described, err := adm.DescribeGroups(deadline(30), a.Group)
	must(err)
	group := described[a.Group]
	must(group.Err)
	two[1].Close()

	pollUntil("the other member left", two[:1], [][]Rec{{}}, func() bool { return len(as[0].sorted()) == len(a.Topics) })
	produceEach(a.Count+4, a.Count+5)
	got = [][]Rec{{}}
	pollUntil("one member", two[:1], got, func() bool { return len(got[0]) >= len(a.Topics) })
	lastRead := offsetsOf(got[0])
	must(two[0].CommitUncommittedOffsets(deadline(30)))
	two[0].Close()
	fetched, err := adm.FetchOffsets(deadline(30), a.Group)
	must(err)
	committed := map[string]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		must(o.Err)
		committed[o.Topic] = o.At
	})
	producer.Close()
	emit("result", map[string]any{
		"first_read": firstRead, "early": early, "two_assigned": assigned, "two_read": twoRead,
		"last_read": lastRead, "committed": committed,
		"described": map[string]any{"state": group.State, "members": len(group.Members),
			"protocol_type": group.ProtocolType},
	})
}

// admin: kadm's create (and again: TOPIC_ALREADY_EXISTS), describe configs, list offsets (start,
// end, by time), describe a group with committed offsets, delete (and again: UNKNOWN_TOPIC).
func admin(a Args) {
	adm := kadm.NewClient(a.client())
	defer adm.Close()
	ctx := deadline(60)
	out := map[string]any{}
	created, err := adm.CreateTopics(ctx, 1, a.Replication, map[string]*string{"retention.ms": kadm.StringPtr("86400000")},
		a.Topics...)
	must(err)
	again, err := adm.CreateTopics(ctx, 1, a.Replication, nil, a.Topics[0])
	must(err)
	out["created"] = errNames(created.Sorted(), func(t kadm.CreateTopicResponse) (string, error) { return t.Topic, t.Err })
	out["created_again"] = errNames(again.Sorted(), func(t kadm.CreateTopicResponse) (string, error) {
		return t.Topic, t.Err
	})

	configs, err := adm.DescribeTopicConfigs(ctx, a.Topics[0])
	must(err)
	described := map[string]string{}
	for _, rc := range configs {
		must(rc.Err)
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" || c.Key == "segment.ms" || c.Key == "max.message.bytes" {
				described[c.Key] = c.MaybeValue() + "/" + c.Source.String()
			}
		}
	}
	out["configs"] = described

	cl := a.client()
	var records []*kgo.Record
	for i := 0; i < 5; i++ {
		records = append(records, makeRecord(a.Topics[0], i, a.BaseMillis+int64(i)*999))
	}
	must(cl.ProduceSync(ctx, records...).FirstErr())
	listed := map[string]int64{}
	for name, list := range map[string]func() (kadm.ListedOffsets, error){
		"start": func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, a.Topics[0]) },
		"end":   func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, a.Topics[0]) },
		"after_third": func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, a.BaseMillis+2*1000, a.Topics[0])
		},
		"after_all": func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, a.BaseMillis+10_000, a.Topics[0])
		},
	} {
		got, err := list()
		must(err)
		o, _ := got.Lookup(a.Topics[0], 0)
		must(o.Err)
		listed[name] = o.Offset
	}
	out["offsets"] = listed

	commits := kadm.Offsets{}
	commits.AddOffset(a.Topics[0], 0, 3, -1)
	committed, err := adm.CommitOffsets(ctx, a.Group, commits)
	must(err)
	must(committed.Error())
	groups, err := adm.DescribeGroups(ctx, a.Group)
	must(err)
	g := groups[a.Group]
	must(g.Err)
	lag, err := adm.Lag(ctx, a.Group)
	must(err)
	groupLag := map[string]int64{}
	for topic, partitions := range lag[a.Group].Lag {
		groupLag[topic] = partitions[0].Lag
	}
	out["group"] = map[string]any{"state": g.State, "members": len(g.Members), "lag": groupLag}
	cl.Close()

	deleted, err := adm.DeleteTopics(ctx, a.Topics...)
	must(err)
	out["deleted"] = errNames(deleted.Sorted(), func(t kadm.DeleteTopicResponse) (string, error) { return t.Topic, t.Err })
	deletedAgain, err := adm.DeleteTopics(ctx, a.Topics[0])
	must(err)
	out["deleted_again"] = errNames(deletedAgain.Sorted(), func(t kadm.DeleteTopicResponse) (string, error) {
		return t.Topic, t.Err
	})
	// Any node may answer the listing: like Kafka's brokers, they learn of the delete within
	// moments of its answer, not all before it.
	remaining := a.Topics
	for wait := deadline(10); len(remaining) > 0 && wait.Err() == nil; time.Sleep(20 * time.Millisecond) {
		topics, err := adm.ListTopics(ctx)
		must(err)
		remaining = []string{}
		for _, t := range a.Topics {
			if topics.Has(t) {
				remaining = append(remaining, t)
			}
		}
	}
	out["remaining"] = remaining
	emit("result", out)
}

func commitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				return fmt.Errorf("commit %s: %w", t.Topic, e)
			}
		}
	}
	return nil
}

func errNames[T any](items []T, of func(T) (string, error)) map[string]string {
	out := map[string]string{}
	for _, item := range items {
		name, err := of(item)
		out[name] = "OK"
		if err != nil {
			var ke *kerr.Error
			if errors.As(err, &ke) {
				out[name] = ke.Message
			} else {
				out[name] = err.Error()
			}
		}
	}
	return out
}

// transactions: committed, aborted and committed again into topics[0]; read_committed and
// read_uncommitted readers; then a GroupTransactSession copies topics[0] to topics[1] with the
// group's offsets in the transaction.
func transactions(a Args) {
	adm := kadm.NewClient(a.client())
	defer adm.Close()
	createTopics(a, adm, a.Topics...)
	in, out := a.Topics[0], a.Topics[1]
	cl := a.client(kgo.TransactionalID(a.TxnID), kgo.TransactionTimeout(30*time.Second))
	ctx := deadline(60)
	n := 0
	for _, step := range []struct {
		count  int
		commit kgo.TransactionEndTry
	}{{3, kgo.TryCommit}, {2, kgo.TryAbort}, {1, kgo.TryCommit}} {
		must(cl.BeginTransaction())
		var batch []*kgo.Record
		for i := 0; i < step.count; i++ {
			batch = append(batch, makeRecord(in, n, a.BaseMillis))
			n++
		}
		must(cl.ProduceSync(ctx, batch...).FirstErr())
		must(cl.EndTransaction(ctx, step.commit))
	}
	cl.Close()
	committed := readAll(a, 4, true, in)
	uncommitted := readAll(a, 6, false, in)

	session, err := kgo.NewGroupTransactSession(a.opts(kgo.TransactionalID(a.TxnID+"-copy"),
		kgo.TransactionTimeout(30*time.Second), kgo.ConsumerGroup(a.Group), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))...)
	must(err)
	copied := 0
	for copied < 4 {
		fetches := session.PollFetches(ctx)
		if ctx.Err() != nil {
			fail(fmt.Errorf("copied %d of 4 before the deadline", copied))
		}
		for _, e := range fetches.Errors() {
			fail(fmt.Errorf("fetch %s: %w", e.Topic, e.Err))
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		must(session.Begin())
		var batch []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			batch = append(batch, &kgo.Record{Topic: out, Key: r.Key, Value: append([]byte("copy-"), r.Value...),
				Headers: r.Headers, Timestamp: r.Timestamp})
		})
		must(session.ProduceSync(ctx, batch...).FirstErr())
		ok, err := session.End(ctx, kgo.TryCommit)
		must(err)
		if !ok {
			fail(errors.New("the copy's transaction was aborted (a rebalance?)"))
		}
		copied += len(batch)
	}
	session.Close()
	offsets, err := adm.FetchOffsets(ctx, a.Group)
	must(err)
	groupOffsets := map[string]int64{}
	offsets.Each(func(o kadm.OffsetResponse) { groupOffsets[o.Topic] = o.At })
	emit("result", map[string]any{"read_committed": committed, "read_uncommitted": uncommitted,
		"copied": readAll(a, 4, true, out), "group_offsets": groupOffsets})
}

func main() {
	if len(os.Args) != 3 {
		fail(errors.New("usage: vdl-franz SCENARIO JSON-ARGS"))
	}
	var a Args
	must(json.Unmarshal([]byte(os.Args[2]), &a))
	scenarios := map[string]func(Args){"produce": produce, "kill-leader": killLeader, "groups": groups,
		"admin": admin, "transactions": transactions, "regex": regexGroup,
		"sarama-produce": saramaProduce, "sarama-groups": saramaGroups, "sarama-admin": saramaAdminScenario,
		"sarama-transactions": saramaTransactions, "sarama-kill-leader": saramaKillLeader,
		"kafkago-produce": kafkagoProduce}
	run, ok := scenarios[os.Args[1]]
	if !ok {
		names := []string{}
		for name := range scenarios {
			names = append(names, name)
		}
		sort.Strings(names)
		fail(fmt.Errorf("unknown scenario %q: one of %s", os.Args[1], strings.Join(names, ", ")))
	}
	run(a)
}

// regexGroup: a group member subscribed by regex (kgo.ConsumeRegex; with the KIP-848 protocol
// the coordinator resolves it: SubscribedTopicRegex) to topics[:2] of the three topics, one
// record each; then topics[3], created now, matches too and its record is read.
func regexGroup(a Args) {
	adm := kadm.NewClient(a.client())
	defer adm.Close()
	createTopics(a, adm, a.Topics[:3]...)
	producer := a.client()
	defer producer.Close()
	for _, t := range a.Topics[:3] {
		must(producer.ProduceSync(deadline(30), makeRecord(t, 0, a.BaseMillis)).FirstErr())
	}
	as := &assignment{}
	member := a.client(groupOpts(Args{Group: a.Group, Topics: []string{a.Regex}, Protocol: a.Protocol},
		append(as.opts(), kgo.ConsumeRegex(), kgo.MetadataMinAge(100*time.Millisecond),
			kgo.MetadataMaxAge(500*time.Millisecond))...)...)
	defer member.Close()
	got := [][]Rec{{}}
	pollUntil("the matching topics", []*kgo.Client{member}, got, func() bool { return len(got[0]) >= 2 })
	first := offsetsOf(got[0])
	firstAssigned := as.sorted()
	createTopics(a, adm, a.Topics[3])
	must(producer.ProduceSync(deadline(30), makeRecord(a.Topics[3], 1, a.BaseMillis)).FirstErr())
	got = [][]Rec{{}}
	pollUntil("the new matching topic", []*kgo.Client{member}, got, func() bool { return len(got[0]) >= 1 })
	emit("result", map[string]any{"first": first, "first_assigned": firstAssigned, "then": offsetsOf(got[0]),
		"then_assigned": as.sorted()})
}
