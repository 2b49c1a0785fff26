"""A librdkafka (confluent-kafka-python) group member for the compatibility suite.

    python ck_consumer.py BOOTSTRAP TOPIC GROUP NAME STRATEGY SESSION_MS CTL_DIR

Same behaviour and JSON-lines output as GroupConsumer.java: subscribe, commit the next
offsets synchronously after processing each non-empty batch (unless CTL_DIR/NAME.nocommit
exists), close cleanly once CTL_DIR/stop exists. STRATEGY is librdkafka's
partition.assignment.strategy ("range", "cooperative-sticky", ...).
"""
import json
import os
import sys

from confluent_kafka import Consumer, TopicPartition


def emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def main():
    bootstrap, topic, group, name, strategy, session_ms, ctl = sys.argv[1:8]
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "group.protocol": "classic", "partition.assignment.strategy": strategy,
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": int(session_ms),
        "heartbeat.interval.ms": max(500, int(session_ms) // 6),
    })

    def ps(parts):
        return sorted(tp.partition for tp in parts)

    # The Python binding (incremental_)assigns after on_assign / unassigns after
    # on_revoke by itself when the callback does not.
    c.subscribe([topic],
                on_assign=lambda _c, parts: emit(e="assigned", ps=ps(parts)),
                on_revoke=lambda _c, parts: emit(e="revoked", ps=ps(parts)),
                on_lost=lambda _c, parts: emit(e="lost", ps=ps(parts)))
    emit(e="started")
    while not os.path.exists(os.path.join(ctl, "stop")):
        msgs = c.consume(num_messages=50, timeout=0.2)
        nxt = {}
        for m in msgs:
            if m.error():
                emit(e="error", err=str(m.error()))
                continue
            emit(e="rec", p=m.partition(), o=m.offset(), v=m.value().decode())
            nxt[m.partition()] = m.offset() + 1
        if not nxt or os.path.exists(os.path.join(ctl, name + ".nocommit")):
            continue
        try:
            res = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in nxt.items()],
                           asynchronous=False)
            bad = [str(tp.error) for tp in res if tp.error]
            if bad:
                emit(e="commit_error", err="; ".join(bad))
            else:
                emit(e="commit", offs={str(p): o for p, o in nxt.items()})
        except Exception as exc:  # KafkaException: the whole commit failed
            emit(e="commit_error", err=str(exc))
    c.close()
    emit(e="closed")


if __name__ == "__main__":
    main()
