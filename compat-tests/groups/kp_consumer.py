"""A kafka-python group member for the compatibility suite.

    python kp_consumer.py BOOTSTRAP TOPIC GROUP NAME STRATEGY SESSION_MS CTL_DIR

Same behaviour and JSON-lines output as GroupConsumer.java. STRATEGY: "range" or
"roundrobin" (kafka-python's eager assignors).
"""
import json
import logging
import os
import sys

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata


def emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        emit(e="revoked", ps=sorted(tp.partition for tp in revoked))

    def on_partitions_assigned(self, assigned):
        emit(e="assigned", ps=sorted(tp.partition for tp in assigned))


def main():
    # The coordinator's join/sync/heartbeat steps go to stderr (a file the harness shows
    # when a scenario fails): a stalled or repeated join is explained there.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)
    bootstrap, topic, group, name, strategy, session_ms, ctl = sys.argv[1:8]
    assignor = {"range": RangePartitionAssignor,
                "roundrobin": RoundRobinPartitionAssignor}[strategy]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      session_timeout_ms=int(session_ms),
                      heartbeat_interval_ms=max(500, int(session_ms) // 6),
                      partition_assignment_strategy=[assignor], max_poll_records=50)
    # The topic's partitions must be in the coordinator's metadata snapshot before the
    # first join. kafka-python 3.0 (3.0.12 here) builds that snapshot when the coordinator
    # is created (empty: nothing subscribed yet) and refreshes it only when a metadata
    # response arrives; it fetches metadata before the first join only for a pattern
    # subscription. A leader that assigns first keeps the empty snapshot as its
    # "assignment snapshot", and the next metadata response makes it rejoin: a rebalance
    # of a stable group that nobody joined or left, whenever that response lands (seen in
    # CI, and the same against Kafka, which rebalances when a stable group's leader
    # rejoins). It also can stall for good: once the leader has assigned again, a poll
    # that returned early while SyncGroup was in flight never completes the join (see
    # test_groups_staggered_join.py). topics() after subscribe() is a blocking metadata
    # fetch whose response updates the snapshot, with the topic subscribed.
    c.subscribe([topic], listener=Listener())
    if topic not in c.topics():
        raise SystemExit(f"topic {topic} not in the cluster's metadata")
    emit(e="started")
    while not os.path.exists(os.path.join(ctl, "stop")):
        batches = c.poll(timeout_ms=200)
        nxt = {}
        for tp, msgs in batches.items():
            for m in msgs:
                emit(e="rec", p=m.partition, o=m.offset, v=m.value.decode())
                nxt[tp] = m.offset + 1
        if not nxt or os.path.exists(os.path.join(ctl, name + ".nocommit")):
            continue
        try:
            c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in nxt.items()})
            emit(e="commit", offs={str(tp.partition): o for tp, o in nxt.items()})
        except Exception as exc:
            emit(e="commit_error", err=repr(exc))
    c.close()
    emit(e="closed")


if __name__ == "__main__":
    main()
