package main

// The fault harness's client side (compat-tests/cluster): writers that record every
// acknowledgement, a reader that records every record it sees while faults happen, and a
// final read-back. The checker (compat-tests/cluster/checker.py) compares the three.
//
//	franz workload -brokers B -topic T -writers N -partitions P [-rf R] [-min-isr M]
//	               [-duration 20s] [-inflight 50] [-rate R] [-log info] -acks FILE -observed FILE
//	    creates T (an existing topic is fine), then for -duration runs N idempotent
//	    acks=all producers; writer w writes values "w<w>-<seq>" with seq 0,1,2,... to
//	    partition w % P, at most R records per second each (0: unlimited). Each acknowledgement is a JSON line in FILE:
//	    {"w","seq","p","o"} on success, {"w","seq","err"} on failure (the record may or
//	    may not be in the log). A concurrent reader writes every record it fetches to
//	    -observed as {"p","o","v"}. Prints a summary JSON line with acks per second.
//	    -log info (or warn, debug) writes each writer's client log to stderr, its lines
//	    stamped with the time and "w<w>": which broker refused what, and each retry.
//	franz readall -brokers B -topic T [-timeout 60s]
//	    reads every partition of T from its start to the end offset it has when the read
//	    begins; one {"p","o","v"} line per record.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type ackLine struct {
	W   int    `json:"w"`
	Seq int64  `json:"seq"`
	P   int32  `json:"p"`
	O   int64  `json:"o"`
	Err string `json:"err,omitempty"`
}

type seenLine struct {
	P int32  `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
}

// lineWriter serialises JSON lines from many goroutines into one buffered file.
type lineWriter struct {
	mu  sync.Mutex
	f   *os.File
	buf *bufio.Writer
	enc *json.Encoder
}

func newLineWriter(path string) *lineWriter {
	f, err := os.Create(path)
	if err != nil {
		fail("create %s: %v", path, err)
	}
	buf := bufio.NewWriter(f)
	return &lineWriter{f: f, buf: buf, enc: json.NewEncoder(buf)}
}

func (l *lineWriter) write(v any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.enc.Encode(v); err != nil {
		fail("write: %v", err)
	}
}

func (l *lineWriter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.buf.Flush(); err != nil {
		fail("flush: %v", err)
	}
	l.f.Close()
}

func createTopic(ctx context.Context, brokers, topic string, partitions, rf, minIsr int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(brokers)...))
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	configs := map[string]*string{}
	if minIsr > 0 {
		v := strconv.Itoa(minIsr)
		configs["min.insync.replicas"] = &v
	}
	for {
		resp, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), configs, topic)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return
		}
		if ctx.Err() != nil {
			fail("create topic %s: %v (%s)", topic, err, resp.ErrMessage)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func workload(args []string) {
	fs := flag.NewFlagSet("workload", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	topic := fs.String("topic", "", "topic")
	writers := fs.Int("writers", 3, "idempotent producers")
	partitions := fs.Int("partitions", 3, "partitions when creating the topic")
	rf := fs.Int("rf", 1, "replication factor when creating the topic")
	minIsr := fs.Int("min-isr", 0, "min.insync.replicas for the topic (0: broker default)")
	duration := fs.Duration("duration", 20*time.Second, "how long the writers write")
	inflight := fs.Int("inflight", 50, "records in flight per writer")
	rate := fs.Int("rate", 0, "records per second per writer (0: as fast as acknowledged)")
	acksPath := fs.String("acks", "", "acknowledgement log")
	logLevel := fs.String("log", "", "writers' client log level on stderr: warn, info or debug (empty: none)")
	observedPath := fs.String("observed", "", "reader's log")
	fs.Parse(args)
	if *topic == "" || *acksPath == "" || *observedPath == "" {
		fail("workload: -topic, -acks and -observed are required")
	}
	level := kgo.LogLevelNone
	switch *logLevel {
	case "":
	case "warn":
		level = kgo.LogLevelWarn
	case "info":
		level = kgo.LogLevelInfo
	case "debug":
		level = kgo.LogLevelDebug
	default:
		fail("workload: -log must be warn, info or debug, not %q", *logLevel)
	}
	setup, cancelSetup := context.WithTimeout(context.Background(), 60*time.Second)
	createTopic(setup, *brokers, *topic, *partitions, *rf, *minIsr)
	cancelSetup()

	acks := newLineWriter(*acksPath)
	observed := newLineWriter(*observedPath)
	start := time.Now()
	var perSecond sync.Map // second since start -> *int64 acks
	var acked, failed atomic.Int64

	readCtx, stopReading := context.WithCancel(context.Background())
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		observe(readCtx, *brokers, *topic, *partitions, observed)
	}()

	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			tag := fmt.Sprintf(" w%d ", w) // this writer's log lines
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(seeds(*brokers)...),
				kgo.DefaultProduceTopic(*topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerLinger(2*time.Millisecond),
				kgo.RecordDeliveryTimeout(60*time.Second),
				kgo.MaxBufferedRecords(*inflight),
				kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string {
					return time.Now().Format("15:04:05.000") + tag
				})),
			)
			if err != nil {
				fail("client: %v", err)
			}
			defer cl.Close()
			part := int32(w % *partitions)
			var pending sync.WaitGroup
			began := time.Now()
			for seq := int64(0); time.Now().Before(deadline); seq++ {
				if *rate > 0 {
					due := began.Add(time.Duration(seq) * time.Second / time.Duration(*rate))
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
					}
				}
				r := &kgo.Record{Partition: part, Value: []byte(fmt.Sprintf("w%d-%d", w, seq))}
				pending.Add(1)
				// Produce blocks while -inflight records are buffered.
				cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
					defer pending.Done()
					line := ackLine{W: w, Seq: seq, P: r.Partition, O: r.Offset}
					if err != nil {
						line = ackLine{W: w, Seq: seq, P: part, O: -1, Err: err.Error()}
						failed.Add(1)
					} else {
						acked.Add(1)
						sec := int64(time.Since(start) / time.Second)
						n, _ := perSecond.LoadOrStore(sec, new(int64))
						atomic.AddInt64(n.(*int64), 1)
					}
					acks.write(line)
				})
			}
			pending.Wait()
		}(w)
	}
	wg.Wait()
	// Let the reader catch up with the last acknowledged writes before it stops.
	time.Sleep(2 * time.Second)
	stopReading()
	<-readerDone
	acks.close()
	observed.close()

	secs := int64(time.Since(start)/time.Second) + 1
	timeline := make([]int64, secs)
	perSecond.Range(func(k, v any) bool {
		if s := k.(int64); s < secs {
			timeline[s] = atomic.LoadInt64(v.(*int64))
		}
		return true
	})
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"acked": acked.Load(), "failed": failed.Load(), "acks_per_second": timeline,
	})
}

// observe reads every partition from the start until ctx ends, logging each record.
// Errors are retried: the reader rides through faults like any consumer.
func observe(ctx context.Context, brokers, topic string, partitions int, out *lineWriter) {
	offsets := map[int32]kgo.Offset{}
	for p := 0; p < partitions; p++ {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds(brokers)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			out.write(seenLine{P: r.Partition, O: r.Offset, V: string(r.Value)})
		})
	}
}

func readall(args []string) {
	fs := flag.NewFlagSet("readall", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers")
	topic := fs.String("topic", "", "topic")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	meta, err := kgo.NewClient(kgo.SeedBrokers(seeds(*brokers)...))
	if err != nil {
		fail("client: %v", err)
	}
	adm := kadm.NewClient(meta)
	var ends kadm.ListedOffsets
	for {
		ends, err = adm.ListEndOffsets(ctx, *topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			fail("list end offsets: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	meta.Close()

	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return
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
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	defer out.Flush()
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			out.Flush()
			fmt.Fprintf(os.Stderr, "franz: readall timed out with partitions %v unfinished\n", want)
			os.Exit(2)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			enc.Encode(seenLine{P: r.Partition, O: r.Offset, V: string(r.Value)})
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
}

// leaders prints {"p","leader","leader_epoch","replicas","isr"} per partition of a topic,
// as the Metadata answer of the brokers gives it (the fault harness aims its nemeses
// at leaders with it).
func leaders(args []string) {
	fs := flag.NewFlagSet("leaders", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers")
	topic := fs.String("topic", "", "topic")
	timeout := fs.Duration("timeout", 10*time.Second, "overall timeout")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(*brokers)...))
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	meta, err := kadm.NewClient(cl).Metadata(ctx, *topic)
	if err != nil {
		fail("metadata: %v", err)
	}
	d, ok := meta.Topics[*topic]
	if !ok || d.Err != nil {
		fail("metadata for %s: %v", *topic, d.Err)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range d.Partitions.Sorted() {
		enc.Encode(map[string]any{"p": p.Partition, "leader": p.Leader, "leader_epoch": p.LeaderEpoch,
			"replicas": p.Replicas, "isr": p.ISR, "controller": meta.Controller})
	}
}

// quorum prints {"leader","epoch","voters","high_watermark"}: the controller quorum as
// DescribeQuorum answers it (the fault harness aims its controller nemeses with it).
func quorum(args []string) {
	fs := flag.NewFlagSet("quorum", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers")
	timeout := fs.Duration("timeout", 10*time.Second, "overall timeout")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(*brokers)...))
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		fail("describe quorum: %v", err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		fail("describe quorum: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	part := resp.Topics[0].Partitions[0]
	if part.ErrorCode != 0 {
		fail("describe quorum: partition error %d", part.ErrorCode)
	}
	voters := []int32{}
	for _, v := range part.CurrentVoters {
		voters = append(voters, v.ReplicaID)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"leader": part.LeaderID, "epoch": part.LeaderEpoch,
		"voters": voters, "high_watermark": part.HighWatermark})
}

// seeds splits a comma-separated bootstrap list ("h1:p1,h2:p2").
func seeds(list string) []string {
	return strings.Split(list, ",")
}
