"""Log compaction (`cleanup.policy=compact`), observed through confluent-kafka only.

Each test starts its own runnel with a fast cleaner (`--log-cleaner-backoff-ms`) and a
fast retention check, on topics with `segment.ms=100` so that an append after a short
pause rolls the active segment and seals the one before it.

1. The cleaner keeps the newest record per key: every record read back is the one
   delivered at that offset (same key, value, timestamp and headers; no renumbering),
   each key's last record is its newest value, the watermarks do not move, once every
   round is sealed each key appears once, a fetch from a removed offset starts at the
   next record kept, and appends go on at the log end offset.
2. A tombstone older than `delete.retention.ms` (0 here) goes too, with the key's older
   values; with the default `delete.retention.ms` (1 day) it stays.
3. A compacted log reads back the same after a graceful restart, and the same
   idempotent producer appends at the log end offset afterwards.
4. `cleanup.policy=compact` alone turns time retention off: with `retention.ms=1` the
   sealed segments stay, while a `delete` topic beside it loses its own.
5. As 1., with batches compressed by each codec.
"""
import os
import time
import uuid
from collections import namedtuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from conftest import RunnelProcess
from test_confluent_kafka import CODECS, create_topic

pytestmark = pytest.mark.skipif(bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason="compaction tests need their own runnel (cleaner flags)")

TIMEOUT = 30.0
COMPACTION_WAIT = 20.0
SEGMENT_MS = 100
# Longer than segment.ms, so the next append rolls the active segment.
ROLL_PAUSE = 0.15
KEYS = [f"key-{k:02d}".encode() for k in range(20)]
ROUNDS = 5

# timestamp is (type, ms); headers is a list of (name, value).
Record = namedtuple("Record", "offset key value timestamp headers")


@pytest.fixture
def broker(tmp_path):
    b = RunnelProcess(tmp_path / "data", extra_args=[
        "--log-cleaner-backoff-ms", "200",
        "--log-retention-check-interval-ms", "100",
    ])
    b.start()
    try:
        yield b
    finally:
        b.kill()


def compact_topic(bootstrap, topic, **extra):
    config = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS),
              "min.cleanable.dirty.ratio": "0.01"}
    config.update(extra)
    create_topic(bootstrap, topic, partitions=1, config=config)


class KeyedProducer:
    """An idempotent producer of keyed records to partition 0, one flush per call, that
    remembers what was delivered at each offset."""

    def __init__(self, bootstrap, topic, codec="none"):
        self.topic = topic
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                           "enable.idempotence": True, "compression.type": codec,
                           "message.timeout.ms": int(TIMEOUT * 1000)})
        self.delivered = {}  # offset -> Record
        self.sent = 0

    def send(self, pairs):
        errors = []

        def cb(key, value, headers):
            def done(err, msg):
                if err is not None:
                    errors.append(err)
                else:
                    self.delivered[msg.offset()] = Record(msg.offset(), key, value,
                                                          msg.timestamp(), headers)
            return done

        for key, value in pairs:
            self.sent += 1
            headers = [("seq", str(self.sent).encode()), ("empty", b"")]
            self.p.produce(self.topic, partition=0, key=key, value=value, headers=headers,
                           on_delivery=cb(key, value, headers))
        assert self.p.flush(TIMEOUT) == 0, "records not delivered in time"
        assert not errors, f"delivery failed: {errors[:3]}"

    def rounds(self, n, keys=KEYS):
        """n rounds of a value per key, a pause after each so the next append rolls."""
        for r in range(n):
            self.send([(k, f"v{r}-{k.decode()}".encode()) for k in keys])
            time.sleep(ROLL_PAUSE)

    def roll(self):
        """One record to an unrelated key after a pause: seals what came before."""
        time.sleep(ROLL_PAUSE)
        self.send([(b"roll", f"roll-{uuid.uuid4().hex[:6]}".encode())])

    def newest(self):
        """key -> the Record with the highest delivered offset."""
        out = {}
        for _, rec in sorted(self.delivered.items()):
            out[rec.key] = rec
        return out


def watermarks(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex}",
                  "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()


def read_log(bootstrap, topic, start=OFFSET_BEGINNING, timeout=TIMEOUT):
    """Every record of partition 0 from `start` up to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        c.assign([TopicPartition(topic, 0, start)])
        out = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        return out
                    continue
                raise AssertionError(f"consume error after offset "
                                     f"{out[-1].offset if out else None}: {msg.error()}")
            out.append(Record(msg.offset(), msg.key(), msg.value(), msg.timestamp(),
                              list(msg.headers() or [])))
        raise AssertionError(f"did not reach the high watermark {high} within {timeout}s; "
                             f"read {len(out)} records, last {out[-1:]}")
    finally:
        c.close()


def check_consistent(log, producer):
    """What any reader may see of a compacted log at any time, mid-cleaning included."""
    offsets = [r.offset for r in log]
    assert offsets == sorted(set(offsets)), f"offsets not strictly increasing: {offsets}"
    for rec in log:
        assert rec == producer.delivered.get(rec.offset), \
            f"offset {rec.offset} reads {rec}, but {producer.delivered.get(rec.offset)} " \
            f"was delivered there (renumbered or corrupted)"
    last_seen = {}
    for rec in log:
        last_seen[rec.key] = rec
    for key, newest in producer.newest().items():
        if newest.value is None and key not in last_seen:
            continue  # a removed tombstone takes the key's older values with it
        assert last_seen.get(key) == newest, \
            f"key {key!r}: last record read is {last_seen.get(key)}, newest delivered {newest}"


def wait_until(bootstrap, topic, producer, done, what, before=None):
    """Read the log until done(log) holds, checking consistency on every read; before()
    runs ahead of each read (to add dirty segments). Returns the last log read."""
    deadline = time.time() + COMPACTION_WAIT
    log = []
    while time.time() < deadline:
        if before:
            before()
        log = read_log(bootstrap, topic)
        check_consistent(log, producer)
        if done(log):
            return log
        time.sleep(0.2)
    raise AssertionError(f"{what} not seen within {COMPACTION_WAIT}s; the log holds "
                         f"{len(log)} of {len(producer.delivered)} records: "
                         f"{[(r.offset, r.key) for r in log][:40]}")


def each_key_once(log):
    keys = [r.key for r in log]
    return len(keys) == len(set(keys))


def check_compaction(broker, topic_name, codec):
    """Rounds of values per key, all sealed; the cleaner must end with the newest each."""
    compact_topic(broker.bootstrap, topic_name)
    prod = KeyedProducer(broker.bootstrap, topic_name, codec)
    prod.rounds(ROUNDS)
    prod.roll()
    produced = len(prod.delivered)
    assert sorted(prod.delivered) == list(range(produced))
    assert watermarks(broker.bootstrap, topic_name) == (0, produced)

    log = wait_until(broker.bootstrap, topic_name, prod,
                     lambda log: len(log) < produced, "any compaction")
    # Every round is sealed (the roll record is alone in the active segment), so the
    # cleaner ends with one record per key: the newest, at its delivered offset.
    log = wait_until(broker.bootstrap, topic_name, prod, each_key_once,
                     "one record per key")
    assert log == sorted(prod.newest().values())
    assert len(log) == len(KEYS) + 1
    assert watermarks(broker.bootstrap, topic_name) == (0, produced), \
        "compaction moved the log start offset or the high watermark"

    # A fetch from an offset the cleaner removed starts at the next record kept.
    kept = {r.offset for r in log}
    gone = [o for o in range(produced) if o not in kept]
    start = gone[len(gone) // 2]
    assert read_log(broker.bootstrap, topic_name, start=start) == \
        [r for r in log if r.offset > start]

    # Appends go on at the log end offset.
    prod.send([(KEYS[0], b"after-compaction")])
    assert max(prod.delivered) == produced
    assert read_log(broker.bootstrap, topic_name)[-1] == prod.delivered[produced]


# ------------------------------------------------------------------ tests

def test_compaction_keeps_newest_value_per_key(broker, topic_name):
    check_compaction(broker, topic_name, "none")


def rounds_then_tombstone(bootstrap, topic, doomed):
    """Three rounds of values, then a tombstone for `doomed`, sealed by a roll record.
    Returns the producer and the tombstone as delivered."""
    prod = KeyedProducer(bootstrap, topic)
    prod.rounds(3)
    time.sleep(ROLL_PAUSE)
    prod.send([(doomed, None)])
    prod.roll()
    tombstone = prod.newest()[doomed]
    assert tombstone.value is None
    return prod, tombstone


def test_tombstone_removed_after_delete_retention(broker, topic_name):
    compact_topic(broker.bootstrap, topic_name, **{"delete.retention.ms": "0"})
    doomed = KEYS[0]
    prod, tombstone = rounds_then_tombstone(broker.bootstrap, topic_name, doomed)

    # Kafka drops a tombstone on a cleaning pass after the one that first cleaned it, so
    # keep adding dirty segments while waiting.
    log = wait_until(broker.bootstrap, topic_name, prod,
                     lambda log: all(r.key != doomed for r in log),
                     f"removal of tombstone {tombstone}", before=prod.roll)
    keep = {k: r for k, r in prod.newest().items() if k != doomed}
    last_seen = {r.key: r for r in log}
    assert {k: last_seen.get(k) for k in keep} == keep, "a live key lost its newest value"
    assert watermarks(broker.bootstrap, topic_name) == (0, max(prod.delivered) + 1)


def test_tombstone_kept_within_delete_retention(broker, topic_name):
    compact_topic(broker.bootstrap, topic_name)  # delete.retention.ms: 1 day by default
    doomed = KEYS[0]
    prod, tombstone = rounds_then_tombstone(broker.bootstrap, topic_name, doomed)

    # Cleaning passes run (the extra roll records keep the log dirty) until every key,
    # the tombstoned one included, is down to its newest record.
    log = wait_until(broker.bootstrap, topic_name, prod,
                     lambda log: each_key_once([r for r in log if r.key != b"roll"]),
                     "one record per key", before=prod.roll)
    assert [r for r in log if r.key == doomed] == [tombstone], \
        "the tombstone must stay readable for delete.retention.ms"


def test_compacted_log_survives_restart(broker, topic_name):
    compact_topic(broker.bootstrap, topic_name)
    prod = KeyedProducer(broker.bootstrap, topic_name)
    prod.rounds(ROUNDS)
    prod.roll()
    produced = len(prod.delivered)
    before = wait_until(broker.bootstrap, topic_name, prod, each_key_once,
                        "one record per key")

    broker.stop()
    assert broker.proc.returncode == 0, \
        f"graceful stop exited with {broker.proc.returncode}; see {broker.log_path}"
    broker.start()
    assert watermarks(broker.bootstrap, topic_name) == (0, produced)
    after = read_log(broker.bootstrap, topic_name)
    assert after == before, "the compacted log reads differently after a restart"

    # The same idempotent producer goes on: its state survived the cleaning and the
    # restart, and the append lands at the log end offset.
    prod.send([(KEYS[1], b"after-restart")])
    assert max(prod.delivered) == produced, "append after the restart not at the log end"
    assert read_log(broker.bootstrap, topic_name) == before + [prod.delivered[produced]]


def test_compact_policy_disables_time_retention(broker, topic_name):
    compacted, deleted = topic_name, topic_name + "-delete"
    compact_topic(broker.bootstrap, compacted, **{"retention.ms": "1"})
    create_topic(broker.bootstrap, deleted, partitions=1, config={
        "cleanup.policy": "delete", "segment.ms": str(SEGMENT_MS), "retention.ms": "1"})
    prod = KeyedProducer(broker.bootstrap, compacted)
    control = KeyedProducer(broker.bootstrap, deleted)
    for r in range(3):
        prod.send([(k, f"v{r}-{k.decode()}".encode()) for k in KEYS])
        control.send([(k, f"v{r}-{k.decode()}".encode()) for k in KEYS])
        time.sleep(ROLL_PAUSE)
    prod.roll()
    control.roll()

    # The delete topic shows that retention has had its chance to run.
    deadline = time.time() + COMPACTION_WAIT
    while time.time() < deadline and watermarks(broker.bootstrap, deleted)[0] == 0:
        time.sleep(0.2)
    low, high = watermarks(broker.bootstrap, deleted)
    assert low > 0, "retention.ms=1 never deleted a segment of the delete topic (control)"
    time.sleep(0.5)  # a few more retention checks

    assert watermarks(broker.bootstrap, compacted) == (0, len(prod.delivered)), \
        "retention moved the log start offset of a compact-only topic"
    log = read_log(broker.bootstrap, compacted)
    check_consistent(log, prod)
    assert {r.key for r in log} == set(KEYS) | {b"roll"}


@pytest.mark.parametrize("codec", [c for c in CODECS if c != "none"])
def test_compaction_of_compressed_batches(broker, topic_name, codec):
    """Last, so that `-x` runs the rest first: the cleaner must open compressed batches
    (Kafka decompresses, filters and recompresses them)."""
    check_compaction(broker, topic_name, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_keyless_record_refused_by_compacted_topic(broker, topic_name, codec):
    """A compacted topic refuses any batch holding a record without a key, compressed or
    not (Kafka decompresses to check): INVALID_RECORD for the whole batch, nothing of it
    stored. The client decides how records are batched, so each record's outcome is
    checked against that rule rather than assuming one batch."""
    compact_topic(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "compression.type": codec,
                  "enable.idempotence": False, "retries": 0, "message.timeout.ms": int(TIMEOUT * 1000)})
    outcomes = {}
    for key in [b"k1", None, b"k3"]:
        p.produce(topic_name, partition=0, key=key, value=b"v" * 100,
                  on_delivery=lambda err, msg, key=key: outcomes.__setitem__(key, (err, msg.offset())))
    assert p.flush(TIMEOUT) == 0
    assert len(outcomes) == 3, outcomes
    err, _ = outcomes[None]
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, outcomes
    delivered = {}
    for key in [b"k1", b"k3"]:
        err, offset = outcomes[key]
        if err is None:
            delivered[offset] = key
        else:  # batched with the keyless record
            assert err.code() == KafkaError.INVALID_RECORD, outcomes
    # Exactly the delivered records are stored, at their offsets.
    assert watermarks(broker.bootstrap, topic_name) == (0, len(delivered))
    assert {r.offset: r.key for r in read_log(broker.bootstrap, topic_name)} == delivered
