"""Broker-wide defaults of topic configs changed at runtime (`kafka-configs --entity-type
brokers --entity-default --alter --add-config log.retention.ms=...`): a topic without its
own value takes the broker's (node id) else the cluster's ("") value, DescribeConfigs says
where it came from, the broker applies it at once, and a bad value is refused."""
import time

import pytest

from .helpers import (
    INVALID_CONFIG, INVALID_REQUEST, MESSAGE_TOO_LARGE, SRC_DEFAULT, SRC_DYNAMIC_TOPIC, create_topic,
    describe_topic_configs, produce,
)
from .test_broker_configs import (
    DELETE, LONG, SET, SRC_DYNAMIC_BROKER, SRC_DYNAMIC_DEFAULT_BROKER, alter, describe, node_id,
)

RETENTION = "log.retention.ms"
USED = (RETENTION, "message.max.bytes", "min.insync.replicas", "log.cleanup.policy", "log.message.timestamp.type",
        "log.roll.ms")
WEEK_MS = str(7 * 24 * 3600 * 1000)


class Defaults:
    """The broker-wide defaults this file sets, put back as they were before and after each
    test: both brokers outlive a test, and a cluster-wide message.max.bytes left behind
    would break every later one. Kafka 4.4 formats its cluster with a cluster-wide
    `min.insync.replicas=1`, which other files' expectations rely on and which it refuses
    to delete while eligible leader replicas (ELR) are enabled, so a value that was there
    is set back rather than deleted. With ELR both refuse to set a broker's own
    `min.insync.replicas`, so that one is not touched per broker."""

    def __init__(self, conn):
        self.conn = conn
        self.me = str(node_id(conn))
        code, configs = describe(conn, "")
        assert code == 0
        self.before = {k: configs[k]["value"] for k in USED if k in configs}

    def reset(self):
        per_broker = [k for k in USED if k != "min.insync.replicas"]
        assert alter(self.conn, self.me, [(DELETE, k, None) for k in per_broker])[0] == 0
        ops = [(SET, k, self.before[k]) if k in self.before else (DELETE, k, None) for k in USED]
        assert alter(self.conn, "", ops)[0] == 0


@pytest.fixture
def clean(conn):
    defaults = Defaults(conn)
    defaults.reset()
    yield defaults
    defaults.reset()


def until(check, timeout=20.0):
    """`check()` once it is truthy, else its last value after `timeout`: Kafka applies a
    committed broker config a moment after it answers."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def topic_entry(conn, topic, name):
    res = describe_topic_configs(conn, topic, synonyms=True, keys=[name])
    assert res["error_code"] == 0, res
    (entry,) = res["configs"]
    return entry


def levels(entry):
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def test_a_topic_without_its_own_value_takes_the_brokers_else_the_clusters(conn, topic, clean):
    me = clean.me
    own = topic + "-own"
    create_topic(conn, topic)
    create_topic(conn, own, configs={"retention.ms": "5000"})
    assert alter(conn, "", [(SET, RETENTION, "123456789")]) == (0, None)
    entry = until(lambda: (e := topic_entry(conn, topic, "retention.ms"))["value"] == "123456789" and e)
    assert entry and (entry["value"], entry["config_source"]) == ("123456789", SRC_DYNAMIC_DEFAULT_BROKER)
    assert levels(entry)[0] == (RETENTION, "123456789", SRC_DYNAMIC_DEFAULT_BROKER)
    entry = topic_entry(conn, own, "retention.ms")
    assert (entry["value"], entry["config_source"]) == ("5000", SRC_DYNAMIC_TOPIC)
    assert levels(entry)[:2] == [("retention.ms", "5000", SRC_DYNAMIC_TOPIC),
                                 (RETENTION, "123456789", SRC_DYNAMIC_DEFAULT_BROKER)]

    # The broker's own value wins over the cluster's.
    assert alter(conn, me, [(SET, RETENTION, "987654321")]) == (0, None)
    entry = until(lambda: (e := topic_entry(conn, topic, "retention.ms"))["value"] == "987654321" and e)
    assert entry and entry["config_source"] == SRC_DYNAMIC_BROKER
    assert levels(entry)[:2] == [(RETENTION, "987654321", SRC_DYNAMIC_BROKER),
                                 (RETENTION, "123456789", SRC_DYNAMIC_DEFAULT_BROKER)]

    # Both deleted: the static default again.
    assert alter(conn, me, [(DELETE, RETENTION, None)])[0] == 0
    assert alter(conn, "", [(DELETE, RETENTION, None)])[0] == 0
    entry = until(lambda: (e := topic_entry(conn, topic, "retention.ms"))["value"] == WEEK_MS and e)
    assert entry and (entry["value"], entry["config_source"]) == (WEEK_MS, SRC_DEFAULT)
    assert all(s["source"] not in (SRC_DYNAMIC_BROKER, SRC_DYNAMIC_DEFAULT_BROKER) for s in entry["synonyms"])


def test_the_broker_resources_list_a_default_set_at_runtime(conn, clean):
    me = clean.me
    assert alter(conn, "", [(SET, RETENTION, "123456789")]) == (0, None)
    code, configs = until(lambda: (r := describe(conn, me))[1][RETENTION]["value"] == "123456789" and r)
    assert code == 0
    entry = configs[RETENTION]
    assert (entry["config_source"], entry["config_type"]) == (SRC_DYNAMIC_DEFAULT_BROKER, LONG)
    assert levels(entry)[0] == (RETENTION, "123456789", SRC_DYNAMIC_DEFAULT_BROKER)
    code, configs = describe(conn, "")
    assert code == 0 and configs[RETENTION]["value"] == "123456789"
    assert configs[RETENTION]["config_source"] == SRC_DYNAMIC_DEFAULT_BROKER


def test_a_cluster_wide_message_max_bytes_refuses_larger_batches_at_once(conn, topic, clean):
    own = topic + "-own"
    create_topic(conn, topic)
    create_topic(conn, own, configs={"max.message.bytes": "1048588"})
    big = [b"x" * 5000]
    assert produce(conn, topic, big)["error_code"] == 0
    assert alter(conn, "", [(SET, "message.max.bytes", "2000")]) == (0, None)
    refused = until(lambda: (p := produce(conn, topic, big))["error_code"] == MESSAGE_TOO_LARGE and p)
    assert refused and refused["base_offset"] == -1
    assert produce(conn, topic, [b"small"])["error_code"] == 0
    # A topic with its own value is not affected.
    assert produce(conn, own, big)["error_code"] == 0
    assert alter(conn, "", [(DELETE, "message.max.bytes", None)])[0] == 0
    assert until(lambda: produce(conn, topic, big)["error_code"] == 0)


def test_a_cluster_wide_min_insync_replicas_is_capped_by_the_replication_factor(conn, topic, clean):
    """min.insync.replicas=2 reaches a topic of one replica, and acks=all writes still
    succeed: Kafka 4.4 requires min(min.insync.replicas, replicas) in-sync replicas
    (`Partition.effectiveMinIsr`), so a setting no topic of that size could meet does not
    stop it."""
    create_topic(conn, topic)
    assert alter(conn, "", [(SET, "min.insync.replicas", "2")]) == (0, None)
    entry = until(lambda: (e := topic_entry(conn, topic, "min.insync.replicas"))["value"] == "2" and e)
    assert entry and entry["config_source"] == SRC_DYNAMIC_DEFAULT_BROKER
    time.sleep(0.5)  # Kafka: the broker's own copy of the config follows the describe
    for _ in range(3):
        assert produce(conn, topic, [b"v"], acks=-1)["error_code"] == 0


@pytest.mark.parametrize("name, value", [
    (RETENTION, "abc"),
    ("log.cleanup.policy", "shred"),
    ("min.insync.replicas", "0"),
    ("log.message.timestamp.type", "Whenever"),
    ("log.roll.ms", "0"),
], ids=["not-a-number", "not-a-policy", "below-minimum", "not-a-choice", "roll-below-minimum"])
def test_a_bad_default_is_refused_and_changes_nothing(conn, clean, name, value):
    for resource in (clean.me, ""):
        code, message = alter(conn, resource, [(SET, name, value)])
        assert code == INVALID_REQUEST, message
        assert name in message, message
    code, configs = describe(conn, "")
    assert code == 0
    assert configs.get(name, {}).get("value") == clean.before.get(name)


def test_a_brokers_own_min_insync_replicas_is_refused_while_eligible_leader_replicas_are_on(conn, clean):
    """With ELR on (KIP-966, both sides' default) min.insync.replicas is set per topic or for
    the cluster: a broker's own value is refused with INVALID_CONFIG and nothing changes."""
    code, message = alter(conn, clean.me, [(SET, "min.insync.replicas", "2")])
    assert (code, message) == (
        INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    code, configs = describe(conn, clean.me, keys=["min.insync.replicas"])
    assert code == 0
    assert configs["min.insync.replicas"]["config_source"] != SRC_DYNAMIC_BROKER, configs
