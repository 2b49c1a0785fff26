"""Apache Kafka 4.4's own CLI tools against the broker: kafka-topics, kafka-configs,
kafka-console-producer/-consumer, kafka-get-offsets and kafka-producer-perf-test.

Each tool is one JVM start (about a second here), so tests run as few as they need.
Assertions are on the tools' stdout, which the quiet log4j2 config keeps free of logging.
"""
import re
import time

from kafka_tools import (CONFIGS, CONSOLE_CONSUMER, CONSOLE_PRODUCER, GET_OFFSETS,
                         PRODUCER_PERF_TEST, TOPICS, create_topic, describe, run_tool)

TOPIC_LINE = re.compile(r"^Topic: (\S+)\tTopicId: (\S+)\tPartitionCount: (\d+)\t"
                        r"ReplicationFactor: (\d+)\tConfigs: (.*)$")
PARTITION_LINE = re.compile(r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+)\t"
                            r"Replicas: ([\d,]*)\tIsr: ([\d,]*)")


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The Java producer's default partition for a keyed record (Utils.murmur2)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    n4 = len(key) // 4
    for i in range(n4):
        k = int.from_bytes(key[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = key[4 * n4:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def topics(bootstrap, *args):
    return run_tool(TOPICS, "--bootstrap-server", bootstrap, *args)


def describe_topic(bootstrap, topic):
    """(PartitionCount, {config: value}, [(partition, leader, replicas, isr)])."""
    proc = topics(bootstrap, "--describe", "--topic", topic)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    head = TOPIC_LINE.match(lines[0])
    assert head, describe(proc)
    assert head.group(1) == topic and head.group(4) == "1", describe(proc)
    # A topic id is a random UUID in URL-safe base64; all-zero means "no id".
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head.group(2)), describe(proc)
    assert head.group(2) != "A" * 22, describe(proc)
    configs = dict(c.split("=", 1) for c in head.group(5).split(",") if c)
    partitions = []
    for line in lines[1:]:
        m = PARTITION_LINE.match(line)
        assert m and m.group(1) == topic, describe(proc)
        partitions.append((int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)))
    return int(head.group(3)), configs, partitions


def list_topics(bootstrap):
    proc = topics(bootstrap, "--list")
    assert proc.returncode == 0, describe(proc)
    return proc.stdout.splitlines()


def get_offsets(bootstrap, topic, time_spec):
    proc = run_tool(GET_OFFSETS, "--bootstrap-server", bootstrap, "--topic", topic,
                    "--time", time_spec)
    assert proc.returncode == 0 and proc.stderr == "", describe(proc)
    return proc.stdout.splitlines()


def assert_single_leader(partitions, count):
    assert [p[0] for p in partitions] == list(range(count)), partitions
    leader = partitions[0][1]
    assert leader >= 0, partitions
    for _, p_leader, replicas, isr in partitions:
        assert (p_leader, replicas, isr) == (leader, str(leader), str(leader)), partitions


def test_topics_create_and_describe(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 3, "retention.ms=3600000", "segment.bytes=1048576")
    count, configs, partitions = describe_topic(b, topic_name)
    assert count == 3
    assert configs.get("retention.ms") == "3600000", configs
    assert configs.get("segment.bytes") == "1048576", configs
    assert_single_leader(partitions, 3)


def test_topics_describe_pages_partitions(shared_runnel, topic_name):
    """Kafka 4's kafka-topics --describe reads DescribeTopicPartitions, a page of at
    most --partition-size-limit-per-response partitions at a time, following the
    broker's cursor: every partition of every matching topic is listed once."""
    create_topic(shared_runnel.bootstrap, topic_name, 7)
    create_topic(shared_runnel.bootstrap, topic_name + "-b", 3)
    proc = topics(shared_runnel.bootstrap, "--describe", "--topic", topic_name + ".*",
                  "--partition-size-limit-per-response", "2")
    assert proc.returncode == 0, describe(proc)
    listed = [(m.group(1), int(m.group(2))) for m in map(PARTITION_LINE.match, proc.stdout.splitlines()) if m]
    want = [(topic_name, p) for p in range(7)] + [(topic_name + "-b", p) for p in range(3)]
    assert sorted(listed) == sorted(want), describe(proc)


def test_topics_create_existing_fails(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 1)
    proc = topics(b, "--create", "--topic", topic_name, "--partitions", "1")
    # The message text is the broker's own; the error code shows as the exception class.
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout.startswith("Error while executing topic command : "), describe(proc)
    assert "org.apache.kafka.common.errors.TopicExistsException" in proc.stderr, describe(proc)


def test_topics_list(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    assert topic_name not in list_topics(b)
    create_topic(b, topic_name, 2)
    other = topic_name + "-other"
    create_topic(b, other, 1)
    listed = list_topics(b)
    assert topic_name in listed and other in listed, listed


def test_topics_alter_partitions(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 2)
    proc = topics(b, "--alter", "--topic", topic_name, "--partitions", "5")
    assert proc.returncode == 0 and proc.stdout == "", describe(proc)
    count, _, partitions = describe_topic(b, topic_name)
    assert count == 5
    assert_single_leader(partitions, 5)
    # Decreasing is refused (INVALID_PARTITIONS).
    proc = topics(b, "--alter", "--topic", topic_name, "--partitions", "3")
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout.startswith("Error while executing topic command : "), describe(proc)
    assert "org.apache.kafka.common.errors.InvalidPartitionsException" in proc.stderr, \
        describe(proc)


def test_topics_delete(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 1)
    proc = topics(b, "--delete", "--topic", topic_name)
    assert proc.returncode == 0 and proc.stdout == "", describe(proc)
    # Deletion is committed before the response, but a broker's metadata view may lag.
    for _ in range(10):
        if topic_name not in list_topics(b):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"{topic_name} still listed after --delete")
    proc = topics(b, "--describe", "--topic", topic_name)
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout == (f"Error while executing topic command : "
                           f"Topic '{topic_name}' does not exist as expected\n"), describe(proc)


def test_console_producer_then_consumer_by_partition(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    partitions = 3
    create_topic(b, topic_name, partitions)
    records = [(f"key-{i % 7}", f"event {i}", f"seq:{i}") for i in range(40)]
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", b, "--topic", topic_name,
                    "--reader-property", "parse.key=true",
                    "--reader-property", "key.separator=:",
                    "--reader-property", "parse.headers=true",
                    "--reader-property", "headers.delimiter=|",
                    input="".join(f"{h}|{k}:{v}\n" for k, v, h in records))
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", describe(proc)

    by_partition = {p: [] for p in range(partitions)}
    for k, v, h in records:
        by_partition[murmur2_partition(k.encode(), partitions)].append((k, v, h))
    assert all(by_partition.values()), "the keys should cover every partition"

    for p, expected in by_partition.items():
        proc = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name,
                        "--partition", p, "--offset", "earliest",
                        "--max-messages", len(expected), "--timeout-ms", "20000",
                        "--formatter-property", "print.partition=true",
                        "--formatter-property", "print.offset=true",
                        "--formatter-property", "print.headers=true",
                        "--formatter-property", "print.key=true")
        assert proc.returncode == 0, describe(proc)
        assert proc.stdout.splitlines() == [
            f"Partition:{p}\tOffset:{i}\t{h}\t{k}\t{v}" for i, (k, v, h) in enumerate(expected)
        ], describe(proc)
        assert proc.stderr == f"Processed a total of {len(expected)} messages\n", describe(proc)

    # From a given offset: the tail of partition 0, and nothing past the end.
    tail = by_partition[0][2:]
    proc = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name,
                    "--partition", "0", "--offset", "2", "--max-messages", len(tail),
                    "--timeout-ms", "20000", "--formatter-property", "print.offset=true")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.splitlines() == [f"Offset:{i + 2}\t{v}" for i, (_, v, _) in enumerate(tail)]

    assert get_offsets(b, topic_name, "-1") == [
        f"{topic_name}:{p}:{len(by_partition[p])}" for p in range(partitions)]


def test_configs_describe_add_delete(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 1, "retention.ms=86400000")
    entity = ["--bootstrap-server", b, "--entity-type", "topics", "--entity-name", topic_name]

    def dynamic_configs():
        proc = run_tool(CONFIGS, "--describe", *entity)
        assert proc.returncode == 0, describe(proc)
        lines = proc.stdout.splitlines()
        assert lines[0] == f"Dynamic configs for topic {topic_name} are:", describe(proc)
        found = {}
        for line in lines[1:]:
            m = re.match(r"^  ([a-z.]+)=(\S*) sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:"
                         r"([a-z.]+)=(\S*?)[,}]", line)
            assert m and m.group(1, 2) == m.group(3, 4), describe(proc)
            found[m.group(1)] = m.group(2)
        return found

    assert dynamic_configs() == {"retention.ms": "86400000"}

    proc = run_tool(CONFIGS, "--alter", *entity,
                    "--add-config", "cleanup.policy=compact,max.message.bytes=20000")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == f"Completed updating config for topic {topic_name}.\n", describe(proc)
    assert dynamic_configs() == {"retention.ms": "86400000", "cleanup.policy": "compact",
                                 "max.message.bytes": "20000"}

    proc = run_tool(CONFIGS, "--alter", *entity, "--delete-config", "retention.ms")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == f"Completed updating config for topic {topic_name}.\n", describe(proc)
    assert dynamic_configs() == {"cleanup.policy": "compact", "max.message.bytes": "20000"}

    # kafka-topics --describe shows the same topic configs.
    _, configs, _ = describe_topic(b, topic_name)
    assert configs.get("cleanup.policy") == "compact", configs
    assert "retention.ms" not in configs, configs


def test_configs_reject_invalid_value(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 1)
    proc = run_tool(CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "topics",
                    "--entity-name", topic_name, "--add-config", "retention.ms=not-a-number")
    assert proc.returncode == 1, describe(proc)
    assert "org.apache.kafka.common.errors.InvalidConfigurationException" in proc.stdout \
        + proc.stderr, describe(proc)


def test_get_offsets_earliest_latest(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 2)
    assert get_offsets(b, topic_name, "-2") == [f"{topic_name}:0:0", f"{topic_name}:1:0"]
    assert get_offsets(b, topic_name, "-1") == [f"{topic_name}:0:0", f"{topic_name}:1:0"]

    keys = [f"k{i}" for i in range(25)]
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", b, "--topic", topic_name,
                    "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                    input="".join(f"{k}:v\n" for k in keys))
    assert proc.returncode == 0, describe(proc)
    counts = [0, 0]
    for k in keys:
        counts[murmur2_partition(k.encode(), 2)] += 1
    assert 0 not in counts

    assert get_offsets(b, topic_name, "earliest") == [f"{topic_name}:0:0", f"{topic_name}:1:0"]
    assert get_offsets(b, topic_name, "latest") == [
        f"{topic_name}:0:{counts[0]}", f"{topic_name}:1:{counts[1]}"]


def test_producer_perf_test(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 1)
    proc = run_tool(PRODUCER_PERF_TEST, "--topic", topic_name, "--num-records", "20000",
                    "--record-size", "100", "--throughput", "-1",
                    "--command-property", f"bootstrap.servers={b}", "acks=all",
                    timeout=180)
    assert proc.returncode == 0, describe(proc)
    assert "Exception" not in proc.stderr and "ERROR" not in proc.stderr, describe(proc)
    last = proc.stdout.splitlines()[-1]
    assert re.fullmatch(r"20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), "
                        r"[\d.]+ ms avg latency, [\d.]+ ms max latency, \d+ ms 50th, "
                        r"\d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.", last), describe(proc)
    assert get_offsets(b, topic_name, "-2") == [f"{topic_name}:0:0"]
    assert get_offsets(b, topic_name, "-1") == [f"{topic_name}:0:20000"]
