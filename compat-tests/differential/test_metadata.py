"""Metadata for topic lists mixing existing and missing topics; topic id look-ups; what
Metadata shows right after CreateTopics, and auto-creation right after DeleteTopics."""
import time

import pytest

from .helpers import wait_ready, NO_ID, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, create_topic, random_uuid, topic_id


def summary(t):
    return (t["name"], t["error_code"], len(t["partitions"]))


@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_metadata_mixed_existing_and_missing(conn, topic, version):
    create_topic(conn, topic + "-a", partitions=2)
    create_topic(conn, topic + "-b", partitions=1)
    names = [topic + "-a", topic + "-missing", topic + "-b"]
    md = conn.call("Metadata", version, topics=[{"name": n} for n in names], allow_auto_topic_creation=False)
    got = sorted(summary(t) for t in md["topics"])
    # v1-v3 always auto-create (see test_metadata_auto_create); v4+ honours the flag.
    missing = [(topic + "-missing", 0, 1)] if version < 4 else []
    got = [g for g in got if g[0] != topic + "-missing" or version >= 4]
    expected = [(topic + "-a", 0, 2), (topic + "-b", 0, 1)]
    if version >= 4:
        expected.append((topic + "-missing", UNKNOWN_TOPIC_OR_PARTITION, 0))
    assert got == sorted(expected)
    if missing:
        assert wait_ready(conn, topic + "-missing", 1)


@pytest.mark.parametrize("version", [1, 3, 4, 12])
def test_metadata_auto_create(conn, topic, version, broker):
    """The request that auto-creates a topic is answered UNKNOWN_TOPIC_OR_PARTITION with no
    partitions (Kafka creates in the background; runnel creates before answering but
    answers the same), and the topic appears moments later: at once on runnel."""
    md = conn.call("Metadata", version, topics=[{"name": topic}], allow_auto_topic_creation=True)
    (t,) = md["topics"]
    assert (t["error_code"], len(t["partitions"])) == (UNKNOWN_TOPIC_OR_PARTITION, 0)
    if broker == "runnel":
        md = conn.call("Metadata", 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
        assert [len(t["partitions"]) for t in md["topics"]] == [1]
    assert len(wait_ready(conn, topic, 1)["partitions"]) == 1


def test_metadata_right_after_create_topics(conn, topic, broker):
    """What a client sees right after CreateTopics succeeds. Kafka guarantees nothing: its
    metadata cache follows the controller's log, and its Metadata answered
    UNKNOWN_TOPIC_OR_PARTITION for up to ~40 ms in 3 of 10 tries here. runnel guarantees the
    broker that answered CreateTopics lists every partition with its leader in its very next
    answer (it waits for its own image before answering CreateTopics)."""
    for i in range(5):
        name = f"{topic}-{i}"
        created = create_topic(conn, name, partitions=3, wait=False)
        md = conn.call("Metadata", 12, topics=[{"name": name}], allow_auto_topic_creation=False)
        (t,) = md["topics"]
        if broker == "runnel":
            assert t["error_code"] == 0 and t["topic_id"] == created["topic_id"], t
            assert [(p["partition_index"], p["leader_id"] >= 0) for p in t["partitions"]] == \
                [(0, True), (1, True), (2, True)], t
        else:
            assert t["error_code"] in (0, UNKNOWN_TOPIC_OR_PARTITION), t
            assert len(wait_ready(conn, name, 3)["partitions"]) == 3


def test_metadata_auto_create_right_after_delete_topics(conn, topic, broker):
    """A client asking for a topic with auto-creation on right after DeleteTopics. Kafka's
    first answer is UNKNOWN_TOPIC_OR_PARTITION (or, before its cache applied the deletion,
    the deleted topic itself), then it re-creates the topic in the background with the
    broker's num.partitions. runnel answers UNKNOWN_TOPIC_OR_PARTITION (the deletion is in
    its image before DeleteTopics returns) and has re-created it by the next request."""
    create_topic(conn, topic, partitions=3)
    old_id = topic_id(conn, topic)
    r = conn.call("DeleteTopics", 6, timeout_ms=30000, topics=[{"name": topic}])
    assert r["responses"][0]["error_code"] == 0, r
    md = conn.call("Metadata", 12, topics=[{"name": topic}], allow_auto_topic_creation=True)
    (t,) = md["topics"]
    first = (t["error_code"], len(t["partitions"]))
    if broker == "runnel":
        assert first == (UNKNOWN_TOPIC_OR_PARTITION, 0), t
    else:
        assert first in ((UNKNOWN_TOPIC_OR_PARTITION, 0), (0, 3)), t
    deadline = time.time() + 20
    while True:
        md = conn.call("Metadata", 12, topics=[{"name": topic}], allow_auto_topic_creation=True)
        (t,) = md["topics"]
        if t["error_code"] == 0 and t["topic_id"] != old_id and len(t["partitions"]) == 1:
            break
        assert broker == "kafka" and time.time() < deadline, t
        time.sleep(0.05)


def test_metadata_partition_fields(conn, topic):
    create_topic(conn, topic, partitions=3)
    md = conn.call("Metadata", 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    (t,) = md["topics"]
    node = md["brokers"][0]["node_id"]
    assert (t["is_internal"], md["controller_id"]) == (False, node)
    assert [(p["partition_index"], p["error_code"], p["leader_id"], p["leader_epoch"], p["replica_nodes"],
             p["isr_nodes"], p["offline_replicas"]) for p in t["partitions"]] == \
        [(i, 0, node, 0, [node], [node], []) for i in range(3)]


def test_metadata_all_topics_lists_new_topic(conn, topic):
    create_topic(conn, topic)
    md = conn.call("Metadata", 12, topics=None, allow_auto_topic_creation=False)
    assert topic in {t["name"] for t in md["topics"]}


def test_metadata_topic_id_matches_create_topics(conn, topic):
    created = create_topic(conn, topic)
    assert created["topic_id"] not in (None, NO_ID)
    assert topic_id(conn, topic) == created["topic_id"]


def test_metadata_lookup_by_topic_id(conn, topic):
    create_topic(conn, topic, partitions=2)
    tid = topic_id(conn, topic)
    md = conn.call("Metadata", 12, topics=[{"name": None, "topic_id": tid}], allow_auto_topic_creation=False)
    (t,) = md["topics"]
    assert (t["name"], t["topic_id"], t["error_code"], len(t["partitions"])) == (topic, tid, 0, 2)


def test_metadata_lookup_unknown_topic_id(conn):
    tid = random_uuid()
    md = conn.call("Metadata", 12, topics=[{"name": None, "topic_id": tid}], allow_auto_topic_creation=False)
    (t,) = md["topics"]
    assert (t["name"], t["topic_id"], t["error_code"], t["partitions"]) == (None, tid, UNKNOWN_TOPIC_ID, [])


def test_metadata_lookup_mixed_ids(conn, topic):
    create_topic(conn, topic)
    tid, missing = topic_id(conn, topic), random_uuid()
    md = conn.call("Metadata", 12, topics=[{"name": None, "topic_id": tid}, {"name": None, "topic_id": missing}],
                   allow_auto_topic_creation=False)
    got = sorted(((t["topic_id"] == tid), t["error_code"]) for t in md["topics"])
    assert got == [(False, UNKNOWN_TOPIC_ID), (True, 0)]


def test_delete_topic_by_id_then_lookup(conn, topic):
    create_topic(conn, topic)
    tid = topic_id(conn, topic)
    r = conn.call("DeleteTopics", 6, timeout_ms=30000, topics=[{"name": None, "topic_id": tid}])
    (d,) = r["responses"]
    assert (d["name"], d["topic_id"], d["error_code"]) == (topic, tid, 0)
    import time
    deadline = time.time() + 10
    while True:
        md = conn.call("Metadata", 12, topics=[{"name": None, "topic_id": tid}], allow_auto_topic_creation=False)
        if md["topics"][0]["error_code"] == UNKNOWN_TOPIC_ID or time.time() > deadline:
            break
        time.sleep(0.05)
    assert md["topics"][0]["error_code"] == UNKNOWN_TOPIC_ID
