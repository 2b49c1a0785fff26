"""Scenario building blocks shared by the differential tests."""
import time
import uuid

from . import kwire

NO_ID = None  # kafka-python decodes the all-zero UUID as None

# Kafka error codes used in the expectations.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
INVALID_RECORD = 87
UNKNOWN_TOPIC_ID = 100

# DescribeConfigs config sources
SRC_DYNAMIC_TOPIC = 1
SRC_STATIC_BROKER = 4
SRC_DEFAULT = 5


def create_topic(conn, name, partitions=1, rf=1, configs=None, version=7, wait=True):
    r = conn.call("CreateTopics", version, timeout_ms=30000, topics=[{
        "name": name, "num_partitions": partitions, "replication_factor": rf,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }])
    t = r["topics"][0]
    assert t["error_code"] == 0, t
    if wait:
        wait_ready(conn, name, partitions)
    return t


def wait_ready(conn, name, partitions=1, timeout=20.0):
    """Until Metadata shows every partition with a leader and that leader serves it
    (ListOffsets answers without NOT_LEADER_OR_FOLLOWER). Kafka propagates asynchronously:
    its metadata cache can name the leader a moment before the replica manager has made
    the partition a leader, and a test that does not retry (a produce the broker refuses
    before looking at leadership, then a ListOffsets) would see the error."""
    deadline = time.time() + timeout
    while True:
        md = conn.call("Metadata", 12, topics=[{"name": name}], allow_auto_topic_creation=False)
        t = md["topics"][0]
        if t["error_code"] == 0 and len(t["partitions"]) == partitions and all(p["leader_id"] >= 0 for p in t["partitions"]):
            served = list_offsets_of(conn, name, -1, [p["partition_index"] for p in t["partitions"]])
            if all(p["error_code"] != NOT_LEADER_OR_FOLLOWER for p in served):
                return t
        if time.time() > deadline:
            raise AssertionError(f"topic {name} not ready: {t}")
        time.sleep(0.05)


def topic_id(conn, name):
    md = conn.call("Metadata", 12, topics=[{"name": name}], allow_auto_topic_creation=False)
    return md["topics"][0]["topic_id"]


NOT_LEADER_OR_FOLLOWER = 6


def produce(conn, name, values, partition=0, timestamps=None, version=9, acks=-1, gzip=False):
    """Produce one batch of `values`; returns the partition response (see produce_batch)."""
    batch = kwire.record_batch(values, timestamps=timestamps, gzip=gzip)
    return produce_batch(conn, name, batch, partition=partition, version=version, acks=acks)


def produce_batch(conn, name, batch, partition=0, version=9, acks=-1):
    """Produce the raw `batch`; returns the partition response. Kafka takes leadership of a
    new topic's partitions asynchronously, so right after CreateTopics it may answer
    NOT_LEADER_OR_FOLLOWER; like a real client, retry that (bounded). No scenario here
    expects that error."""
    deadline = time.time() + 10
    while True:
        r = conn.call("Produce", version, acks=acks, timeout_ms=30000, topic_data=[{
            "name": name, "partition_data": [{"index": partition, "records": batch}]}])
        p = r["responses"][0]["partition_responses"][0]
        if p["error_code"] != NOT_LEADER_OR_FOLLOWER or time.time() > deadline:
            return p
        time.sleep(0.1)


def produce_ok(conn, name, values, **kw):
    p = produce(conn, name, values, **kw)
    assert p["error_code"] == 0, p
    return p["base_offset"]


def fetch(conn, name, offset, partition=0, version=12, max_wait_ms=0, tid=None):
    topic = {"topic": name} if version < 13 else {"topic_id": tid}
    topic["partitions"] = [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1, "log_start_offset": -1}]
    r = conn.call("Fetch", version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=1 << 22,
                  isolation_level=0, session_id=0, session_epoch=-1, topics=[topic])
    assert r["error_code"] == 0, r
    return r["responses"][0]["partitions"][0]


def list_offsets(conn, name, timestamp, partition=0, version=7):
    return list_offsets_of(conn, name, timestamp, [partition], version)[0]


def list_offsets_of(conn, name, timestamp, partitions, version=7):
    """One ListOffsets for `partitions` of `name`: the partition responses, in order."""
    r = conn.call("ListOffsets", version, replica_id=-1, isolation_level=0, topics=[{
        "name": name, "partitions": [{"partition_index": i, "timestamp": timestamp, "current_leader_epoch": -1}
                                     for i in partitions]}])
    return r["topics"][0]["partitions"]


def delete_records(conn, name, offset, partition=0):
    r = conn.call("DeleteRecords", 2, timeout_ms=30000, topics=[{
        "name": name, "partitions": [{"partition_index": partition, "offset": offset}]}])
    return r["topics"][0]["partitions"][0]


def describe_topic_configs(conn, name, synonyms=False, keys=None, version=4):
    r = conn.call("DescribeConfigs", version, include_synonyms=synonyms, include_documentation=False, resources=[{
        "resource_type": 2, "resource_name": name, "configuration_keys": keys}])
    return r["results"][0]


def config_map(result):
    return {c["name"]: c for c in result["configs"]}


def incremental_alter(conn, name, ops, validate_only=False):
    """ops: [(op, key, value)]; returns (error_code, message)."""
    r = conn.call("IncrementalAlterConfigs", 1, validate_only=validate_only, resources=[{
        "resource_type": 2, "resource_name": name,
        "configs": [{"name": k, "config_operation": op, "value": v} for op, k, v in ops]}])
    res = r["responses"][0]
    return res["error_code"], res["error_message"]


def random_uuid():
    return uuid.uuid4()
