// The "group" subcommand: a classic-protocol group member with the same behaviour and
// JSON-lines output as compat-tests/groups/GroupConsumer.java.
//
//	franz group -brokers B -topic T -group G -name N [-balancer range|cooperative-sticky]
//	    [-session 6s] -ctl DIR
//
// Subscribes with kgo.ConsumerGroup, no auto-commit, rebalances blocked while a polled
// batch is processed (BlockRebalanceOnPoll); after each non-empty batch it commits the
// next offsets synchronously (CommitRecords) unless DIR/N.nocommit exists, and it leaves
// the group cleanly once DIR/stop exists.
//
// It registers itself from init() so that main.go needs no change: init runs before
// main, handles "group" and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	if len(os.Args) >= 2 && os.Args[1] == "group" {
		groupMember(os.Args[2:])
		os.Exit(0)
	}
}

var emitMu sync.Mutex

func emit(v map[string]any) {
	emitMu.Lock()
	defer emitMu.Unlock()
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func partitionsOf(m map[string][]int32, topic string) []int32 {
	ps := append([]int32{}, m[topic]...)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func groupMember(args []string) {
	fs := flag.NewFlagSet("group", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap broker")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "group id")
	name := fs.String("name", "franz", "member name (client id)")
	balancer := fs.String("balancer", "cooperative-sticky", "range|cooperative-sticky")
	session := fs.Duration("session", 6*time.Second, "session timeout")
	ctl := fs.String("ctl", "", "control directory")
	fs.Parse(args)
	if *topic == "" || *group == "" || *ctl == "" {
		fail("group: -topic, -group and -ctl are required")
	}
	var bal kgo.GroupBalancer
	switch *balancer {
	case "range":
		bal = kgo.RangeBalancer()
	case "cooperative-sticky":
		bal = kgo.CooperativeStickyBalancer()
	default:
		fail("unknown balancer %q", *balancer)
	}
	hb := *session / 6
	if hb < 500*time.Millisecond {
		hb = 500 * time.Millisecond
	}
	cb := func(ev string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(map[string]any{"e": ev, "ps": partitionsOf(m, *topic)})
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds(*brokers)...),
		kgo.ClientID(*name),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.Balancers(bal),
		kgo.SessionTimeout(*session),
		kgo.HeartbeatInterval(hb),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(cb("assigned")),
		kgo.OnPartitionsRevoked(cb("revoked")),
		kgo.OnPartitionsLost(cb("lost")),
	)
	if err != nil {
		fail("client: %v", err)
	}
	emit(map[string]any{"e": "started"})
	for !exists(filepath.Join(*ctl, "stop")) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := cl.PollRecords(ctx, 50)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded {
				emit(map[string]any{"e": "error", "err": fmt.Sprintf("%s[%d]: %v", t, p, err)})
			}
		})
		recs := fetches.Records()
		next := map[string]int64{}
		for _, r := range recs {
			emit(map[string]any{"e": "rec", "p": r.Partition, "o": r.Offset, "v": string(r.Value)})
			next[strconv.Itoa(int(r.Partition))] = r.Offset + 1
		}
		if len(recs) > 0 && !exists(filepath.Join(*ctl, *name+".nocommit")) {
			cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := cl.CommitRecords(cctx, recs...); err != nil {
				emit(map[string]any{"e": "commit_error", "err": err.Error()})
			} else {
				emit(map[string]any{"e": "commit", "offs": next})
			}
			ccancel()
		}
		cl.AllowRebalance()
	}
	cl.Close() // leaves the group
	emit(map[string]any{"e": "closed"})
}
