"""A confluent-kafka (librdkafka) consumer group and producer, run inside the client
namespace by the cluster tests (`test_faults.py`).

`run BOOTSTRAP TOPIC GROUP OUT_DIR SECONDS`: creates TOPIC (3 partitions, RF=3,
min.insync.replicas=2), produces with acks=all (idempotent) for SECONDS while two group
members consume it, committing synchronously what they processed. Writes JSON lines:
`acks.jsonl` (acknowledged values), `consumed.jsonl` (values consumed), `events.jsonl`
(commits, commit errors, assignments). Stops when OUT_DIR/stop exists: each member
commits its position once more (retrying through errors) and closes.

`committed BOOTSTRAP TOPIC GROUP`: prints {partition: [committed offset, high watermark]}
as JSON, read by a new member of the group.
"""
import json
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3


def create_topic(bootstrap, topic):
    adm = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    adm.create_topics([new])[topic].result(30)
    deadline = time.time() + 30
    while time.time() < deadline:
        t = adm.list_topics(topic, timeout=10).topics.get(topic)
        if t and not t.error and len(t.partitions) == PARTITIONS and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic} has no leaders")


def produce(bootstrap, topic, seconds, out, rate=200):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 120000, "linger.ms": 5})
    acks = open(out / "acks.jsonl", "w", buffering=1)

    def acked(err, msg):
        if err is None:
            acks.write(json.dumps({"v": msg.value().decode(), "p": msg.partition(), "o": msg.offset()}) + "\n")

    start, n = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        p.produce(topic, value=f"v-{n}".encode(), key=str(n).encode(), on_delivery=acked)
        n += 1
        p.poll(0)
        time.sleep(1 / rate)
    left = p.flush(120)
    acks.close()
    (out / "produced").write_text(json.dumps({"sent": n, "unflushed": left}))


def nothing_to_commit(e):
    """The member owns no partition (between rebalances): its consumed records are its
    partitions' new owners' to commit."""
    return e.args and e.args[0].code() == KafkaError._NO_OFFSET


def member(bootstrap, topic, group, name, out, consumed, events, lock):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})

    def log(**e):
        with lock:
            events.write(json.dumps({"m": name, "t": time.time(), **e}) + "\n")

    c.subscribe([topic], on_assign=lambda _, ps: log(e="assigned", ps=[p.partition for p in ps]),
                on_revoke=lambda _, ps: log(e="revoked", ps=[p.partition for p in ps]))
    last_commit = time.monotonic()
    pending = False
    while not (out / "stop").exists():
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            with lock:
                consumed.write(json.dumps({"v": msg.value().decode(), "p": msg.partition()}) + "\n")
            pending = True
        if pending and time.monotonic() - last_commit > 0.5:
            last_commit = time.monotonic()
            try:
                c.commit(asynchronous=False)
                pending = False
                log(e="commit")
            except KafkaException as e:
                pending = pending and not nothing_to_commit(e)
                log(e="commit-error", err=str(e))
    # The last commit must land: retried through a coordinator that is still moving.
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        try:
            c.commit(asynchronous=False)
            pending = False
            log(e="commit", final=True)
        except KafkaException as e:
            pending = not nothing_to_commit(e)
            log(e="commit-error", err=str(e))
            time.sleep(0.5)
    c.close()
    log(e="closed", pending=pending)


def run(bootstrap, topic, group, out, seconds):
    out = Path(out)
    create_topic(bootstrap, topic)
    lock = threading.Lock()
    consumed = open(out / "consumed.jsonl", "w", buffering=1)
    events = open(out / "events.jsonl", "w", buffering=1)
    threads = [threading.Thread(target=member, args=(bootstrap, topic, group, f"m{i}", out, consumed, events, lock))
               for i in (1, 2)]
    threads.append(threading.Thread(target=produce, args=(bootstrap, topic, seconds, out)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def committed(bootstrap, topic, group):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    ps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    result = {}
    for tp in c.committed(ps, timeout=30):
        _, high = c.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=30)
        result[tp.partition] = [tp.offset, high]
    c.close()
    print(json.dumps(result))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6]))
    else:
        committed(sys.argv[2], sys.argv[3], sys.argv[4])
