"""Issue 12: three members of a non-JVM client join a group one after another on a
3-partition topic with 12 records; after each rebalance every member gets the records of
its partitions from the committed offsets on. The scenario and what it checks are in
groups/staggered_join.py; the members are the same programs as test_groups_clients.py's.

kafka-python's member (groups/kp_consumer.py) fetches the topic's metadata after it
subscribes and before it first polls: without that, kafka-python 3.0.12 stalled for good in about one run of three
(a client race after a leader's assignment made without metadata; see kp_consumer.py).
"""
import sys

import pytest

from groups.harness import HERE as GROUPS, Member, stop_members
from groups.staggered_join import staggered_join_scenario
from test_franz_go import franz  # noqa: F401  (session fixture: builds the helper)
from test_groups_clients import SESSION_MS, group_id


def run(runnel, topic, group, tmp_path, spawn_cmd):
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    members = []

    def spawn(name):
        m = Member(name, spawn_cmd(name, ctl), tmp_path)
        members.append(m)
        return m
    try:
        staggered_join_scenario(runnel.bootstrap, topic, group, spawn)
    finally:
        stop_members(ctl, members)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_librdkafka_staggered_join(runnel, topic_name, tmp_path, strategy):
    group = group_id("rdkafka-stagger")
    run(runnel, topic_name, group, tmp_path, lambda name, ctl: [
        sys.executable, GROUPS / "ck_consumer.py", runnel.bootstrap, topic_name, group, name,
        strategy, SESSION_MS, ctl])


def test_kafka_python_staggered_join(runnel, topic_name, tmp_path):
    group = group_id("kpy-stagger")
    run(runnel, topic_name, group, tmp_path, lambda name, ctl: [
        sys.executable, GROUPS / "kp_consumer.py", runnel.bootstrap, topic_name, group, name,
        "range", SESSION_MS, ctl])


@pytest.mark.parametrize("balancer", ["range", "cooperative-sticky"])
def test_franz_go_staggered_join(runnel, topic_name, tmp_path, franz, balancer):
    group = group_id("franz-stagger")
    run(runnel, topic_name, group, tmp_path, lambda name, ctl: [
        franz, "group", "-brokers", runnel.bootstrap, "-topic", topic_name, "-group", group,
        "-name", name, "-balancer", balancer, "-session", f"{SESSION_MS}ms", "-ctl", ctl])
