"""KIP-227 incremental fetch sessions, side by side: the session a full Fetch opens, what
an incremental Fetch answers, and the session errors (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR)."""
from .helpers import create_topic, produce_ok, topic_id

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106


def session_fetch(conn, session_id, epoch, topics=(), forgotten=(), version=12):
    return conn.call("Fetch", version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 22,
                     isolation_level=0, session_id=session_id, session_epoch=epoch, topics=list(topics),
                     forgotten_topics_data=list(forgotten), rack_id="")


def by_name(name, partitions):
    return {"topic": name, "partitions": [
        {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
         "log_start_offset": -1, "last_fetched_epoch": -1} for p, offset in partitions]}


def answered(r):
    """(partition, error, high watermark, has records) of every partition answered."""
    return [(p["partition_index"], p["error_code"], p["high_watermark"], bool(p["records"]))
            for t in r["responses"] for p in t["partitions"]]


def test_an_incremental_fetch_answers_only_partitions_with_news(conn, topic):
    create_topic(conn, topic, partitions=2)
    produce_ok(conn, topic, [b"a", b"b"])
    r = session_fetch(conn, 0, 0, [by_name(topic, [(0, 0), (1, 0)])])
    session = r["session_id"]
    assert (r["error_code"], session != 0) == (0, True)
    assert answered(r) == [(0, 0, 2, True), (1, 0, 0, False)]
    # Partition 0 read to its end; nothing new anywhere: nothing answered.
    r = session_fetch(conn, session, 1, [by_name(topic, [(0, 2)])])
    assert (r["error_code"], r["session_id"], answered(r)) == (0, session, [])
    produce_ok(conn, topic, [b"c"], partition=1)
    r = session_fetch(conn, session, 2)
    assert (r["error_code"], r["session_id"], answered(r)) == (0, session, [(1, 0, 1, True)])
    # The session did not hear that partition 1 moved: it reads it from 0 again.
    r = session_fetch(conn, session, 3, forgotten=[{"topic": topic, "partitions": [1]}])
    assert answered(r) == []
    produce_ok(conn, topic, [b"d"], partition=1)
    produce_ok(conn, topic, [b"e"], partition=0)
    r = session_fetch(conn, session, 4)
    assert answered(r) == [(0, 0, 3, True)]


def test_session_errors(conn, topic):
    create_topic(conn, topic)
    r = session_fetch(conn, 0, 0, [by_name(topic, [(0, 0)])])
    session = r["session_id"]
    assert session != 0
    for epoch in (2, 5):  # the session expects epoch 1
        r = session_fetch(conn, session, epoch)
        assert (r["error_code"], r["session_id"], r["responses"]) == (INVALID_FETCH_SESSION_EPOCH, 0, [])
    other = session ^ 0x5A5A
    r = session_fetch(conn, other, 1)
    assert (r["error_code"], r["session_id"], r["responses"]) == (FETCH_SESSION_ID_NOT_FOUND, 0, [])
    # Session id 0 with an epoch above 0 names no session.
    r = session_fetch(conn, 0, 3)
    assert r["error_code"] == FETCH_SESSION_ID_NOT_FOUND
    # A session opened by topic name is not used by topic id; the epoch stays where it was.
    r = session_fetch(conn, session, 1, version=13)
    assert (r["error_code"], r["session_id"]) == (FETCH_SESSION_TOPIC_ID_ERROR, 0)
    r = session_fetch(conn, session, 1)
    assert (r["error_code"], r["session_id"]) == (0, session)
    # A full fetch without a session that names it closes it.
    tid = topic_id(conn, topic)
    r = session_fetch(conn, session, -1, [{"topic_id": tid, "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
         "log_start_offset": -1, "last_fetched_epoch": -1}]}], version=13)
    assert (r["error_code"], r["session_id"]) == (0, 0)
    r = session_fetch(conn, session, 2)
    assert r["error_code"] == FETCH_SESSION_ID_NOT_FOUND
