"""Consumer groups with librdkafka (confluent-kafka-python), kafka-python and franz-go.

Each member runs in its own process (groups/ck_consumer.py, groups/kp_consumer.py,
`franz group` from compat-tests/franz/group.go) so that one can be SIGKILLed; the scenario
is groups/harness.py's kill_scenario (see there). librdkafka runs both the eager range
assignor and cooperative-sticky; franz-go its default cooperative-sticky balancer and
range; kafka-python its eager range assignor.

Also here: committed offsets and group state across broker restarts (graceful and
kill -9), and OffsetCommit bad input through librdkafka.
"""
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import ConsumerGroupState

from groups.harness import HERE as GROUPS, Member, kill_scenario
from test_confluent_kafka import admin, create_topic, produce_all
from test_franz_go import franz  # noqa: F401  (session fixture: builds the helper)

SESSION_MS = 6000


def group_id(client):
    return f"g-{client}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_librdkafka_group_kill_member(runnel, topic_name, tmp_path, strategy):
    group, ctl = group_id("rdkafka"), tmp_path / "ctl"

    def spawn(name):
        return Member(name, [sys.executable, GROUPS / "ck_consumer.py", runnel.bootstrap,
                             topic_name, group, name, strategy, SESSION_MS, ctl], tmp_path)

    kill_scenario(runnel.bootstrap, topic_name, group, ctl, spawn, SESSION_MS)


def test_kafka_python_group_kill_member(runnel, topic_name, tmp_path):
    group, ctl = group_id("kpy"), tmp_path / "ctl"

    def spawn(name):
        return Member(name, [sys.executable, GROUPS / "kp_consumer.py", runnel.bootstrap,
                             topic_name, group, name, "range", SESSION_MS, ctl], tmp_path)

    kill_scenario(runnel.bootstrap, topic_name, group, ctl, spawn, SESSION_MS)


@pytest.mark.parametrize("balancer", ["cooperative-sticky", "range"])
def test_franz_go_group_kill_member(runnel, topic_name, tmp_path, franz, balancer):
    group, ctl = group_id("franz"), tmp_path / "ctl"

    def spawn(name):
        return Member(name, [franz, "group", "-brokers", runnel.bootstrap, "-topic",
                             topic_name, "-group", group, "-name", name, "-balancer",
                             balancer, "-session", f"{SESSION_MS}ms", "-ctl", ctl], tmp_path)

    kill_scenario(runnel.bootstrap, topic_name, group, ctl, spawn, SESSION_MS)


# ---------------------------------------------------------------- broker restarts

def consumer(bootstrap, group, **extra):
    cfg = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
           "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
           "heartbeat.interval.ms": 1000, "client.id": "restart-test"}
    cfg.update(extra)
    return Consumer(cfg)


def poll_n(c, n, timeout=30):
    out = []
    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        assert not m.error(), m.error()
        out.append(m)
    assert len(out) == n, f"got {len(out)} of {n} records"
    return out


def committed(bootstrap, group, topic, partitions):
    c = consumer(bootstrap, group)
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: (tp.offset, tp.metadata) for tp in res}
    finally:
        c.close()


def describe_group(bootstrap, group):
    adm = admin(bootstrap)  # must outlive the future
    return adm.describe_consumer_groups([group])[group].result(timeout=20)


def test_commits_and_group_survive_broker_restarts(runnel, topic_name):
    if runnel.external:
        pytest.skip("needs to restart the broker")
    b, group = runnel.bootstrap, group_id("restart")
    create_topic(b, topic_name, partitions=3)
    produce_all(b, topic_name, [(i % 3, None, f"v{i}".encode(), None, None)
                                for i in range(90)])   # 30 per partition

    # Commit 1 (with metadata), then a graceful restart.
    c = consumer(b, group)
    c.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
    c.commit(offsets=[TopicPartition(topic_name, 0, 10, metadata="m0"),
                      TopicPartition(topic_name, 1, 20, metadata="m1"),
                      TopicPartition(topic_name, 2, 5, metadata="")], asynchronous=False)
    c.close()
    first = {0: (10, "m0"), 1: (20, "m1"), 2: (5, None)}
    assert committed(b, group, topic_name, 3) in (first, {**first, 2: (5, "")})
    runnel.restart()
    after = committed(b, group, topic_name, 3)
    assert {p: o for p, (o, _) in after.items()} == {0: 10, 1: 20, 2: 5}
    assert after[0][1] == "m0" and after[1][1] == "m1", f"metadata lost: {after}"

    # A subscribed member resumes exactly at the commits and commits again.
    c = consumer(b, group)
    c.subscribe([topic_name])
    msgs = poll_n(c, 20 + 10 + 25)
    firsts = {}
    for m in msgs:
        firsts.setdefault(m.partition(), m.offset())
    assert firsts == {0: 10, 1: 20, 2: 5}, f"did not resume at the committed offsets: {firsts}"
    assert c.poll(1.0) is None, "read past the end"
    c.commit(asynchronous=False)
    assert {p: o for p, (o, _) in committed(b, group, topic_name, 3).items()} == \
        {0: 30, 1: 30, 2: 30}

    # With the member still in the group: kill -9 the broker, start it again.
    desc = describe_group(b, group)
    assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 1
    member_id = desc.members[0].member_id
    runnel.kill()
    runnel.start()
    desc = describe_group(b, group)
    assert not desc.is_simple_consumer_group and desc.partition_assignor == "range", \
        (desc.is_simple_consumer_group, desc.partition_assignor)
    # Kafka reloads a classic group with its members (then expires them if they stop
    # heartbeating); the live member carries on without a rebalance or rejoins.
    assert desc.state in (ConsumerGroupState.STABLE, ConsumerGroupState.PREPARING_REBALANCING,
                          ConsumerGroupState.COMPLETING_REBALANCING), desc.state
    assert [m.member_id for m in desc.members] in ([member_id], []), \
        [m.member_id for m in desc.members]
    print("after kill -9 and start:", desc.state, [m.member_id for m in desc.members])
    assert {p: o for p, (o, _) in committed(b, group, topic_name, 3).items()} == \
        {0: 30, 1: 30, 2: 30}, "commits lost by kill -9"

    produce_all(b, topic_name, [(i % 3, None, f"w{i}".encode(), None, None)
                                for i in range(30)])
    more = poll_n(c, 30)
    assert sorted((m.partition(), m.offset()) for m in more) == \
        sorted((p, 30 + i) for p in range(3) for i in range(10)), "lost or repeated records"
    c.commit(asynchronous=False)
    c.close()
    desc = describe_group(b, group)
    assert desc.state == ConsumerGroupState.EMPTY and not desc.members, \
        (desc.state, desc.members)
    runnel.restart()
    desc = describe_group(b, group)
    assert desc.state == ConsumerGroupState.EMPTY, desc.state
    assert {p: o for p, (o, _) in committed(b, group, topic_name, 3).items()} == \
        {0: 40, 1: 40, 2: 40}


# ---------------------------------------------------------------- bad input

def test_commit_to_missing_partition_is_refused(shared_runnel, topic_name):
    b, group = shared_runnel.bootstrap, group_id("bad")
    create_topic(b, topic_name, partitions=2)
    c = consumer(b, group)
    try:
        with pytest.raises(KafkaException) as exc:
            res = c.commit(offsets=[TopicPartition(topic_name, 7, 3)], asynchronous=False)
            # librdkafka may report per-partition errors instead of raising.
            errs = [tp.error for tp in res if tp.error]
            if errs:
                raise KafkaException(errs[0])
        assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, exc.value
        # A good commit next to it still works, and the bad one left nothing behind.
        c.commit(offsets=[TopicPartition(topic_name, 1, 3)], asynchronous=False)
        res = c.committed([TopicPartition(topic_name, p) for p in (0, 1)], timeout=20)
        assert [(tp.partition, tp.offset) for tp in res] == [(0, -1001), (1, 3)]
    finally:
        c.close()


# ---------------------------------------------------------------- static membership

def wait_assigned(c, n, timeout=30):
    deadline = time.time() + timeout
    while len(c.assignment()) < n and time.time() < deadline:
        m = c.poll(0.2)
        assert m is None or not m.error(), m.error()
    assert len(c.assignment()) == n, c.assignment()


def test_static_membership_fencing_and_rejoin(shared_runnel, topic_name):
    b, group = shared_runnel.bootstrap, group_id("static")
    create_topic(b, topic_name, partitions=3)
    a = consumer(b, group, **{"group.instance.id": "inst-1", "client.id": "static-a"})
    a.subscribe([topic_name])
    wait_assigned(a, 3)
    desc = describe_group(b, group)
    assert [(m.client_id, m.group_instance_id) for m in desc.members] == \
        [("static-a", "inst-1")], desc.members
    first_member = desc.members[0].member_id

    # A second process with the same group.instance.id takes the identity over; the
    # first one is fenced (FENCED_INSTANCE_ID, fatal in librdkafka).
    b2 = consumer(b, group, **{"group.instance.id": "inst-1", "client.id": "static-b"})
    b2.subscribe([topic_name])
    wait_assigned(b2, 3)
    fenced = None
    deadline = time.time() + 20
    while fenced is None and time.time() < deadline:
        m = a.poll(0.2)
        if m is not None and m.error():
            fenced = m.error()
    assert fenced is not None and fenced.code() in (KafkaError.FENCED_INSTANCE_ID,
                                                    KafkaError._FATAL), fenced
    desc = describe_group(b, group)
    # (Kafka keeps the replaced member's client id until the next rebalance.)
    assert [m.group_instance_id for m in desc.members] == ["inst-1"], desc.members
    assert desc.members[0].member_id != first_member
    print("after fencing:", desc.state, [(m.member_id, m.client_id) for m in desc.members])
    a.close()

    # A static member that closes does not leave: the group keeps it until the session
    # times out, and a restart with the same instance id gets its partitions back
    # immediately, without waiting for the session timeout.
    b2.close()
    desc = describe_group(b, group)
    assert [m.group_instance_id for m in desc.members] == ["inst-1"], desc.members
    assert desc.state == ConsumerGroupState.STABLE, desc.state
    started = time.time()
    c = consumer(b, group, **{"group.instance.id": "inst-1", "client.id": "static-c"})
    c.subscribe([topic_name])
    wait_assigned(c, 3, timeout=SESSION_MS / 1000 - 1)
    assert time.time() - started < SESSION_MS / 1000 - 1
    c.close()
