// segmentio/kafka-go scenarios (PLAINTEXT): its Writer, its Client's Fetch (sessionless, as
// kafka-go sends it: session id -1, epoch -1) and a Reader in a consumer group.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

var kafkagoCodecs = map[string]compress.Compression{"none": 0, "gzip": compress.Gzip,
	"snappy": compress.Snappy, "lz4": compress.Lz4, "zstd": compress.Zstd}

func kafkagoMessage(i int, base int64) kafkago.Message {
	r := makeRecord("", i, base)
	m := kafkago.Message{Value: r.Value, Time: r.Timestamp}
	if r.Key != nil {
		m.Key = r.Key
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafkago.Header{Key: h.Key, Value: h.Value})
	}
	return m
}

func kafkagoBytes(b kafkago.Bytes) *string {
	if b == nil {
		return nil
	}
	data, err := io.ReadAll(b)
	must(err)
	s := string(data)
	return &s
}

// kafkagoFetch reads `count` records from the start of the topic with Client.Fetch.
func kafkagoFetch(client *kafkago.Client, topic string, count int) []Rec {
	got := []Rec{}
	for offset := int64(0); len(got) < count; {
		res, err := client.Fetch(deadline(30), &kafkago.FetchRequest{Topic: topic, Partition: 0,
			Offset: offset, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 500 * time.Millisecond})
		must(err)
		must(res.Error)
		for {
			r, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			must(err)
			headers := [][]string{}
			for _, h := range r.Headers {
				headers = append(headers, []string{h.Key, string(h.Value)})
			}
			got = append(got, Rec{topic, r.Offset, kafkagoBytes(r.Key), *kafkagoBytes(r.Value), headers,
				r.Time.UnixMilli()})
			offset = r.Offset + 1
		}
	}
	return got
}

// kafkagoProduce: per codec, a topic created by Client.CreateTopics, `count` records written by
// a Writer (acks=all) and read back by Client.Fetch; then a Reader in `group` reads the first
// topic, its commits fetched back by Client.OffsetFetch.
func kafkagoProduce(a Args) {
	client := &kafkago.Client{Addr: kafkago.TCP(a.Bootstrap...), Timeout: 30 * time.Second}
	records := map[string][]Rec{}
	for i, codec := range a.Codecs {
		topic := a.Topics[i]
		created, err := client.CreateTopics(deadline(30), &kafkago.CreateTopicsRequest{
			Topics: []kafkago.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: int(a.Replication)}}})
		must(err)
		must(created.Errors[topic])
		writer := &kafkago.Writer{Addr: kafkago.TCP(a.Bootstrap...), Topic: topic, RequiredAcks: kafkago.RequireAll,
			Compression: kafkagoCodecs[codec], BatchSize: a.Count, BatchTimeout: 10 * time.Millisecond}
		messages := []kafkago.Message{}
		for j := 0; j < a.Count; j++ {
			messages = append(messages, kafkagoMessage(j, a.BaseMillis))
		}
		must(writer.WriteMessages(deadline(60), messages...))
		must(writer.Close())
		records[codec] = kafkagoFetch(client, topic, a.Count)
	}

	reader := kafkago.NewReader(kafkago.ReaderConfig{Brokers: a.Bootstrap, GroupID: a.Group, Topic: a.Topics[0],
		MaxWait: 200 * time.Millisecond, StartOffset: kafkago.FirstOffset})
	grouped := []Rec{}
	ctx := deadline(60)
	for len(grouped) < a.Count {
		m, err := reader.ReadMessage(ctx) // commits each message at once (CommitInterval 0)
		must(err)
		headers := [][]string{}
		for _, h := range m.Headers {
			headers = append(headers, []string{h.Key, string(h.Value)})
		}
		var key *string
		if m.Key != nil {
			k := string(m.Key)
			key = &k
		}
		grouped = append(grouped, Rec{m.Topic, m.Offset, key, string(m.Value), headers, m.Time.UnixMilli()})
	}
	must(reader.Close())
	offsets, err := client.OffsetFetch(context.Background(), &kafkago.OffsetFetchRequest{GroupID: a.Group,
		Topics: map[string][]int{a.Topics[0]: {0}}})
	must(err)
	must(offsets.Error)
	committed := offsets.Topics[a.Topics[0]]
	if len(committed) != 1 {
		fail(fmt.Errorf("OffsetFetch answered %d partitions", len(committed)))
	}
	must(committed[0].Error)
	emit("result", map[string]any{"records": records, "group": grouped, "committed": committed[0].CommittedOffset})
}
