"""Dynamic broker configs (the replication throttle rates `kafka-reassign-partitions
--throttle` sets): IncrementalAlterConfigs and DescribeConfigs on BROKER resources, one
broker's (its node id) and the cluster default's (""), and what either refuses."""
import time

import pytest

from .helpers import INVALID_REQUEST

SET, DELETE = 0, 1
RESOURCE_BROKER = 4
SRC_DYNAMIC_BROKER, SRC_DYNAMIC_DEFAULT_BROKER = 2, 3
LONG = 5
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
RATES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)


def node_id(conn):
    md = conn.call("Metadata", 12, topics=[], allow_auto_topic_creation=False)
    return md["brokers"][0]["node_id"]


def alter(conn, resource, ops):
    """ops: [(op, key, value)]; returns (error_code, message)."""
    r = conn.call("IncrementalAlterConfigs", 1, validate_only=False, resources=[{
        "resource_type": RESOURCE_BROKER, "resource_name": resource,
        "configs": [{"name": k, "config_operation": op, "value": v} for op, k, v in ops]}])
    res = r["responses"][0]
    return res["error_code"], res["error_message"]


def describe(conn, resource, keys=None):
    r = conn.call("DescribeConfigs", 4, include_synonyms=True, include_documentation=False, resources=[{
        "resource_type": RESOURCE_BROKER, "resource_name": resource, "configuration_keys": keys}])
    res = r["results"][0]
    return res["error_code"], {c["name"]: c for c in res["configs"]}


def settled(conn, resource, want, timeout=20.0):
    """The rate entries of `resource` once they are `want` ({name: (value, source)}):
    Kafka applies a committed change to its broker's config a moment later."""
    deadline = time.monotonic() + timeout
    while True:
        code, configs = describe(conn, resource)
        assert code == 0
        got = {n: (c["value"], c["config_source"]) for n, c in configs.items() if n in RATES}
        if got == want or time.monotonic() > deadline:
            return got, configs


@pytest.fixture
def clean(conn):
    """Rates cleared before and after: the reference broker outlives one test."""
    me = str(node_id(conn))
    for resource in (me, ""):
        assert alter(conn, resource, [(DELETE, r, None) for r in RATES])[0] == 0
    yield me
    for resource in (me, ""):
        alter(conn, resource, [(DELETE, r, None) for r in RATES])


def test_a_rate_set_on_the_broker_is_listed_as_a_dynamic_broker_config(conn, clean):
    me = clean
    got, _ = settled(conn, me, {})
    assert got == {}, "a rate that is not set is not listed"
    assert alter(conn, me, [(SET, LEADER_RATE, "1000"), (SET, FOLLOWER_RATE, "2000"),
                            (SET, LOG_DIRS_RATE, "3000")]) == (0, None)
    want = {LEADER_RATE: ("1000", SRC_DYNAMIC_BROKER), FOLLOWER_RATE: ("2000", SRC_DYNAMIC_BROKER),
            LOG_DIRS_RATE: ("3000", SRC_DYNAMIC_BROKER)}
    got, configs = settled(conn, me, want)
    assert got == want
    entry = configs[LEADER_RATE]
    assert entry["config_type"] == LONG
    assert [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]] == \
        [(LEADER_RATE, "1000", SRC_DYNAMIC_BROKER)]
    # Deleted: gone again.
    assert alter(conn, me, [(DELETE, LEADER_RATE, None), (DELETE, LOG_DIRS_RATE, None)])[0] == 0
    got, _ = settled(conn, me, {FOLLOWER_RATE: ("2000", SRC_DYNAMIC_BROKER)})
    assert got == {FOLLOWER_RATE: ("2000", SRC_DYNAMIC_BROKER)}


def test_the_cluster_default_is_listed_under_its_own_resource_and_under_the_brokers(conn, clean):
    me = clean
    assert alter(conn, "", [(SET, LEADER_RATE, "5000")]) == (0, None)
    want = {LEADER_RATE: ("5000", SRC_DYNAMIC_DEFAULT_BROKER)}
    got, configs = settled(conn, "", want)
    assert got == want
    # Only what is set there (the reference broker may carry other cluster defaults).
    assert {c["config_source"] for c in configs.values()} == {SRC_DYNAMIC_DEFAULT_BROKER}, configs
    assert FOLLOWER_RATE not in configs
    got, _ = settled(conn, me, want)
    assert got == want
    # The broker's own value wins, and the default follows it as a synonym.
    assert alter(conn, me, [(SET, LEADER_RATE, "100")]) == (0, None)
    got, configs = settled(conn, me, {LEADER_RATE: ("100", SRC_DYNAMIC_BROKER)})
    assert got == {LEADER_RATE: ("100", SRC_DYNAMIC_BROKER)}
    assert [(s["value"], s["source"]) for s in configs[LEADER_RATE]["synonyms"]] == \
        [("100", SRC_DYNAMIC_BROKER), ("5000", SRC_DYNAMIC_DEFAULT_BROKER)]


@pytest.mark.parametrize("ops", [
    [(SET, LEADER_RATE, "abc")],
    [(SET, LEADER_RATE, "-5")],
    [(SET, "broker.id", "7")],
    [(SET, "log.dirs", "/elsewhere")],
    [(SET, FOLLOWER_RATE, "1000"), (SET, "node.id", "7")],
    [(SET, LEADER_RATE, None)],
], ids=["not-a-number", "negative", "broker-id", "log-dirs", "one-bad-of-two", "null"])
def test_refused_changes_change_nothing(conn, clean, ops):
    me = clean
    code, message = alter(conn, me, ops)
    assert code == INVALID_REQUEST, message
    got, _ = settled(conn, me, {}, timeout=0)
    assert got == {}


def test_another_brokers_resource_is_refused(conn, clean):
    me = int(clean)
    code, _ = alter(conn, str(me + 100), [(SET, LEADER_RATE, "1000")])
    assert code == INVALID_REQUEST
    code, _ = describe(conn, str(me + 100))
    assert code == INVALID_REQUEST
