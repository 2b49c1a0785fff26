// franz is a small franz-go client used by the runnel compatibility suite.
//
//	franz produce -brokers B -topic T -n N [-partitions P] [-compression C] [-create=false]
//	    creates T with P partitions (kadm; an existing topic is fine), then produces N
//	    keyed records with headers synchronously with franz-go's defaults (idempotent
//	    producer, acks=all, murmur2 key partitioning). Prints one JSON line per record:
//	    {"partition","offset","key","value","headers"} in the order produced.
//	franz consume -brokers B -topic T -n N [-timeout 30s]
//	    consumes every partition of T from the start without a group and prints one
//	    JSON line per record; exits 0 after N records, 2 on timeout.
//	franz offsets -brokers B -topic T
//	    prints {"partition","start","end"} per partition (ListOffsets).
//
// Any failure prints a message on stderr and exits non-zero.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type rec struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       string   `json:"key"`
	Value     string   `json:"value"`
	Headers   []header `json:"headers"`
	Timestamp int64    `json:"timestamp,omitempty"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "franz: "+format+"\n", args...)
	os.Exit(1)
}

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "none", "":
		return kgo.NoCompression()
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	fail("unknown compression %q", name)
	panic("unreachable")
}

func toRec(r *kgo.Record) rec {
	out := rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
		Headers: []header{}, Timestamp: r.Timestamp.UnixMilli()}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, header{h.Key, string(h.Value)})
	}
	return out
}

func produce(args []string) {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap broker")
	topic := fs.String("topic", "", "topic")
	n := fs.Int("n", 100, "records to produce")
	partitions := fs.Int("partitions", 3, "partitions when creating the topic")
	compression := fs.String("compression", "none", "none|gzip|snappy|lz4|zstd")
	create := fs.Bool("create", true, "create the topic first")
	timeout := fs.Duration("timeout", 60*time.Second, "overall timeout")
	fs.Parse(args)
	if *topic == "" {
		fail("produce: -topic is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds(*brokers)...),
		kgo.DefaultProduceTopic(*topic),
		kgo.ProducerBatchCompression(codec(*compression)),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()

	if *create {
		adm := kadm.NewClient(cl)
		resp, err := adm.CreateTopic(ctx, int32(*partitions), 1, nil, *topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			fail("create topic %s: %v (%s)", *topic, err, resp.ErrMessage)
		}
	}

	recs := make([]*kgo.Record, *n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Key:   []byte(fmt.Sprintf("key-%d", i%50)),
			Value: []byte(fmt.Sprintf("value-%d-%s", i, *compression)),
			Headers: []kgo.RecordHeader{
				{Key: "seq", Value: []byte(fmt.Sprint(i))},
				{Key: "client", Value: []byte("franz-go")},
			},
		}
	}
	// ProduceSync returns results in completion order; the records themselves carry
	// their partition and offset afterwards, so print them in produce order.
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		fail("produce: %v", err)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range recs {
		if err := enc.Encode(toRec(r)); err != nil {
			fail("write: %v", err)
		}
	}
}

func topicPartitions(ctx context.Context, adm *kadm.Client, topic string) []int32 {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		fail("metadata: %v", err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		fail("metadata for %s: %v", topic, d.Err)
	}
	var ps []int32
	for p := range d.Partitions {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func consume(args []string) {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap broker")
	topic := fs.String("topic", "", "topic")
	n := fs.Int("n", 100, "records to read before exiting")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Parse(args)
	if *topic == "" {
		fail("consume: -topic is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	meta, err := kgo.NewClient(kgo.SeedBrokers(seeds(*brokers)...))
	if err != nil {
		fail("client: %v", err)
	}
	ps := topicPartitions(ctx, kadm.NewClient(meta), *topic)
	meta.Close()

	offsets := map[int32]kgo.Offset{}
	for _, p := range ps {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds(*brokers)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()

	enc := json.NewEncoder(os.Stdout)
	got := 0
	for got < *n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "franz: timeout after %d of %d records\n", got, *n)
			os.Exit(2)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("%s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			fail("fetch: %v", ferr)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if err := enc.Encode(toRec(r)); err != nil {
				fail("write: %v", err)
			}
			got++
		})
	}
}

func offsets(args []string) {
	fs := flag.NewFlagSet("offsets", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap broker")
	topic := fs.String("topic", "", "topic")
	timeout := fs.Duration("timeout", 30*time.Second, "overall timeout")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(*brokers)...))
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, *topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		fail("list start offsets: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, *topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		fail("list end offsets: %v", err)
	}
	var ps []int32
	for p := range ends[*topic] {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	enc := json.NewEncoder(os.Stdout)
	for _, p := range ps {
		s, _ := starts.Lookup(*topic, p)
		e, _ := ends.Lookup(*topic, p)
		enc.Encode(map[string]int64{"partition": int64(p), "start": s.Offset, "end": e.Offset})
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: franz produce|consume|offsets|workload|readall|leaders|quorum [flags]")
		os.Exit(64)
	}
	switch os.Args[1] {
	case "produce":
		produce(os.Args[2:])
	case "consume":
		consume(os.Args[2:])
	case "offsets":
		offsets(os.Args[2:])
	case "workload":
		workload(os.Args[2:])
	case "readall":
		readall(os.Args[2:])
	case "leaders":
		leaders(os.Args[2:])
	case "quorum":
		quorum(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "franz: unknown command %q\n", os.Args[1])
		os.Exit(64)
	}
}
