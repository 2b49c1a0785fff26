"""A consumer group with committed offsets on both brokers, seen through
kafka-consumer-groups: the coordinator it names (the leader of the group's partition of
__consumer_offsets; one broker here), the group's state, and the offsets with their lag.
Kafka's reference broker runs with offsets.topic.num.partitions=1 and runnel with its
default of 50, so this also checks that the partition count does not show."""
from confluent_kafka import Consumer, TopicPartition

from kafka_tools import CONSUMER_GROUPS, describe, run_tool

from .helpers import create_topic, produce_ok


def _table(text, first_column):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [first_column]:
            return [line.split()] + [row.split() for row in lines[i + 1:] if row.strip()]
    raise AssertionError(f"no {first_column} table in {text!r}")


def test_consumer_groups_describe_a_group_with_committed_offsets(bootstrap, conn, topic):
    create_topic(conn, topic, partitions=2)
    produce_ok(conn, topic, [b"a", b"b", b"c"])
    group = f"{topic}-my-group"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    c.close()

    proc = run_tool(CONSUMER_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert proc.returncode == 0, describe(proc)
    assert _table(proc.stdout, "GROUP") == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
         "CLIENT-ID"],
        [group, topic, "0", "2", "3", "1", "-", "-", "-"],
    ], describe(proc)

    proc = run_tool(CONSUMER_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state")
    assert proc.returncode == 0, describe(proc)
    header, row = _table(proc.stdout, "GROUP")
    assert header == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], describe(proc)
    assert row == [group, bootstrap, "(1)", "-", "Empty", "0"], describe(proc)
