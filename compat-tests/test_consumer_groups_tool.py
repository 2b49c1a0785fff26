"""kafka-consumer-groups (Kafka 4.4's ConsumerGroupCommand) against the broker.

--list (with the --state filter), --describe (offsets with LAG, --members --verbose,
--state), every --reset-offsets mode on an inactive group (--to-earliest, --to-latest,
--to-offset, --shift-by, --to-datetime; --dry-run; a partition subset), re-reading
history after a reset, --delete-offsets and --delete, and the errors the tool reports
for a group that still has members. The tool exits 0 even when it reports an error, so
every check is on its output and on the offsets it leaves behind.
"""
import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_tools import CONSUMER_GROUPS, describe, run_tool
from test_confluent_kafka import create_topic, produce_all

PER_PARTITION = 30
NO_OFFSET = -1001


def cg(bootstrap, *args):
    proc = run_tool(CONSUMER_GROUPS, "--bootstrap-server", bootstrap, *args, check=True)
    assert "Exception" not in proc.stderr or "Error" in proc.stdout, describe(proc)
    return proc


def table(text, first_column="GROUP"):
    """Rows of the whitespace-separated table whose header starts with first_column."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [first_column]:
            header = line.split()
            return [dict(zip(header, row.split())) for row in lines[i + 1:] if row.strip()]
    return []


def offsets_table(proc):
    """{partition: (CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID)}"""
    return {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"],
                                  r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"])
            for r in table(proc.stdout)}


def reset_table(proc):
    return {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(proc.stdout)}


def group_consumer(bootstrap, group, **extra):
    cfg = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "cg-tool-test",
           "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    cfg.update(extra)
    return Consumer(cfg)


def committed(bootstrap, group, topic, partitions=3):
    c = group_consumer(bootstrap, group)
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


def subscribed(bootstrap, group, topic, partitions=3):
    """A member of `group` subscribed to `topic` that owns all its partitions."""
    c = group_consumer(bootstrap, group)
    c.subscribe([topic])
    deadline = time.time() + 30
    while len(c.assignment()) < partitions and time.time() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == partitions, c.assignment()
    return c


def read_all(bootstrap, group, topic, expected, timeout=30):
    """Join `group`, read until `expected` records arrived (and nothing more), commit,
    close. Returns {partition: [offsets]}."""
    c = group_consumer(bootstrap, group)
    c.subscribe([topic])
    got = {}
    n = 0
    deadline = time.time() + timeout
    try:
        while n < expected and time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert not m.error(), m.error()
            got.setdefault(m.partition(), []).append(m.offset())
            n += 1
        assert n == expected, f"read {n} of {expected} records: {got}"
        extra = c.poll(1.0)
        assert extra is None, f"unexpected record {extra.partition()}/{extra.offset()}"
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


@pytest.fixture
def setup(shared_runnel, topic_name):
    """A 3-partition topic with 30 records per partition (record k of a partition has
    timestamp base + k seconds) and a fresh group name. Returns (bootstrap, topic,
    group, base timestamp ms)."""
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, partitions=3)
    base = (int(time.time()) - 3600) * 1000
    produce_all(b, topic_name, [(p, None, f"{p}-{k}".encode(), None, base + k * 1000)
                                for k in range(PER_PARTITION) for p in range(3)])
    return b, topic_name, f"cg-{uuid.uuid4().hex[:10]}", base


def commit(consumer, topic, offsets):
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                    asynchronous=False)


def test_list_describe_lag_and_refusals_while_active(setup):
    b, topic, group, _ = setup
    c = subscribed(b, group, topic)
    try:
        commit(c, topic, {0: 10, 1: 20, 2: 30})
        # A second group, empty: only committed offsets (a "simple" consumer).
        idle = group + "-idle"
        s = group_consumer(b, idle)
        commit(s, topic, {0: 1})
        s.close()

        listed = cg(b, "--list").stdout.split()
        assert group in listed and idle in listed
        stable = {r["GROUP"]: r["STATE"] for r in table(cg(b, "--list", "--state",
                                                          "Stable").stdout)}
        empty = {r["GROUP"]: r["STATE"] for r in table(cg(b, "--list", "--state",
                                                         "Empty").stdout)}
        assert stable.get(group) == "Stable" and idle not in stable, stable
        assert empty.get(idle) == "Empty" and group not in empty, empty

        proc = cg(b, "--describe", "--group", group)
        rows = offsets_table(proc)
        assert {p: r[:3] for p, r in rows.items()} == \
            {0: ("10", "30", "20"), 1: ("20", "30", "10"), 2: ("30", "30", "0")}, proc.stdout
        member = {r[3] for r in rows.values()}
        assert len(member) == 1 and member.pop().startswith("cg-tool-test-"), proc.stdout
        assert {r[4:] for r in rows.values()} == {("/127.0.0.1", "cg-tool-test")}, proc.stdout

        # Lag follows the log end offset.
        produce_all(b, topic, [(2, None, b"late", None, None)] * 5)
        rows = offsets_table(cg(b, "--describe", "--group", group, "--offsets"))
        assert rows[2][:3] == ("30", "35", "5") and rows[0][:3] == ("10", "30", "20")

        members = table(cg(b, "--describe", "--group", group, "--members",
                           "--verbose").stdout)
        assert len(members) == 1, members
        assert members[0]["#PARTITIONS"] == "3" and \
            members[0]["CURRENT-ASSIGNMENT"] == f"{topic}:0,1,2", members

        state = cg(b, "--describe", "--group", group, "--state").stdout
        row = state.splitlines()[-1].split()
        assert row[0] == group and row[-3:] == ["range", "Stable", "1"], state

        # Refusals while the group has a member; nothing changes.
        proc = cg(b, "--reset-offsets", "--group", group, "--topic", topic,
                  "--to-earliest", "--execute")
        assert f"Assignments can only be reset if the group '{group}' is inactive, but " \
               "the current state is Stable." in proc.stdout, describe(proc)
        proc = cg(b, "--delete", "--group", group)
        assert f"Group '{group}' could not be deleted due to: " \
               "org.apache.kafka.common.errors.GroupNotEmptyException" in proc.stdout, \
            describe(proc)
        proc = cg(b, "--delete-offsets", "--group", group, "--topic", topic)
        statuses = {r["PARTITION"]: r["STATUS"] for r in table(proc.stdout, "TOPIC")}
        assert statuses == {str(p): "Error:" for p in range(3)} and \
            proc.stdout.count("GroupSubscribedToTopicException") == 3, describe(proc)
        assert committed(b, group, topic) == {0: 10, 1: 20, 2: 30}
        assert group in cg(b, "--list").stdout.split()
    finally:
        c.close()

    # The member left: the group is Empty and its offsets remain.
    proc = cg(b, "--describe", "--group", group)
    rows = offsets_table(proc)
    assert rows == {0: ("10", "30", "20", "-", "-", "-"), 1: ("20", "30", "10", "-", "-", "-"),
                    2: ("30", "35", "5", "-", "-", "-")}, proc.stdout
    assert f"Consumer group '{group}' has no active members." in proc.stderr
    row = cg(b, "--describe", "--group", group, "--state").stdout.splitlines()[-1].split()
    assert row[-2:] == ["Empty", "0"], row


def test_reset_offsets_every_mode(setup):
    b, topic, group, base = setup
    c = subscribed(b, group, topic)
    commit(c, topic, {0: 10, 1: 20, 2: 30})
    c.close()

    def reset(*args, expect):
        proc = cg(b, "--reset-offsets", "--group", group, *args)
        assert reset_table(proc) == expect, describe(proc)
        return proc

    def check(expect):
        assert committed(b, group, topic) == expect

    # Without --execute (or with --dry-run) nothing is written.
    reset("--topic", topic, "--to-earliest", expect={0: 0, 1: 0, 2: 0})
    reset("--topic", topic, "--to-earliest", "--dry-run", expect={0: 0, 1: 0, 2: 0})
    check({0: 10, 1: 20, 2: 30})

    reset("--topic", topic, "--to-earliest", "--execute", expect={0: 0, 1: 0, 2: 0})
    check({0: 0, 1: 0, 2: 0})
    reset("--all-topics", "--to-latest", "--execute", expect={0: 30, 1: 30, 2: 30})
    check({0: 30, 1: 30, 2: 30})
    reset("--topic", topic, "--to-offset", "7", "--execute", expect={0: 7, 1: 7, 2: 7})
    check({0: 7, 1: 7, 2: 7})
    reset("--topic", f"{topic}:1", "--to-offset", "3", "--execute", expect={1: 3})
    check({0: 7, 1: 3, 2: 7})
    reset("--topic", topic, "--shift-by", "5", "--execute", expect={0: 12, 1: 8, 2: 12})
    check({0: 12, 1: 8, 2: 12})
    # Shifts are clamped to the log: below the start, past the end.
    reset("--topic", topic, "--shift-by", "-10", "--execute", expect={0: 2, 1: 0, 2: 2})
    reset("--topic", topic, "--shift-by", "100", "--execute", expect={0: 30, 1: 30, 2: 30})
    check({0: 30, 1: 30, 2: 30})
    # --to-offset beyond the end is clamped too.
    reset("--topic", topic, "--to-offset", "1000", "--execute", expect={0: 30, 1: 30, 2: 30})

    # --to-datetime: the first record at or after the time; record k is at base + k s.
    when = datetime.datetime.fromtimestamp((base + 12_500) / 1000)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}"
    reset("--topic", topic, "--to-datetime", stamp, "--execute", expect={0: 13, 1: 13, 2: 13})
    check({0: 13, 1: 13, 2: 13})

    # The group re-reads history from the reset position...
    got = read_all(b, group, topic, 3 * (PER_PARTITION - 13))
    assert got == {p: list(range(13, PER_PARTITION)) for p in range(3)}
    check({0: PER_PARTITION, 1: PER_PARTITION, 2: PER_PARTITION})
    # ...and from the start after --to-earliest.
    reset("--topic", topic, "--to-earliest", "--execute", expect={0: 0, 1: 0, 2: 0})
    got = read_all(b, group, topic, 3 * PER_PARTITION)
    assert got == {p: list(range(PER_PARTITION)) for p in range(3)}


def test_delete_offsets_and_delete_group(setup, shared_runnel):
    b, topic, group, _ = setup
    other = topic + "-b"
    create_topic(b, other, partitions=1)
    c = group_consumer(b, group)
    commit(c, topic, {0: 10, 1: 20, 2: 30})
    commit(c, other, {0: 0})
    c.close()

    proc = cg(b, "--delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert f"Request succeeded for deleting offsets from group {group}." in proc.stdout
    assert [(r["TOPIC"], r["PARTITION"], r["STATUS"]) for r in table(proc.stdout, "TOPIC")] \
        == [(topic, "1", "Successful")], describe(proc)
    assert committed(b, group, topic) == {0: 10, 1: NO_OFFSET, 2: 30}

    proc = cg(b, "--delete-offsets", "--group", group, "--topic", topic)
    assert sorted(r["PARTITION"] for r in table(proc.stdout, "TOPIC")
                  if r["STATUS"] == "Successful") == ["0", "1", "2"], describe(proc)
    assert committed(b, group, topic) == {0: NO_OFFSET, 1: NO_OFFSET, 2: NO_OFFSET}
    assert committed(b, group, other, 1) == {0: 0}
    rows = table(cg(b, "--describe", "--group", group).stdout)
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"]) for r in rows] == \
        [(other, "0", "0")], rows

    proc = cg(b, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." \
        in proc.stdout, describe(proc)
    assert group not in cg(b, "--list").stdout.split()
    assert committed(b, group, other, 1) == {0: NO_OFFSET}
    proc = cg(b, "--describe", "--group", group)
    # DescribeGroups v6 (Kafka 4.4) reports GROUP_ID_NOT_FOUND, older versions a Dead group.
    assert f"Consumer group '{group}' does not exist." in proc.stdout or \
        f"GroupIdNotFoundException: Group {group} not found." in proc.stdout, describe(proc)
    proc = cg(b, "--delete", "--group", group)
    assert f"Group '{group}' could not be deleted due to: " \
           "org.apache.kafka.common.errors.GroupIdNotFoundException" in proc.stdout, \
        describe(proc)
