"""kcat (librdkafka 2.x, Debian's package) against the broker: metadata, produce with keys
and headers, consume from the beginning / a given offset / a given partition.

kcat cannot create topics with several partitions, so those tests create theirs with
Kafka's own kafka-topics tool (kafka_tools.create_topic).
"""
import json
import shutil
import subprocess
import time

import pytest

import kafka_tools

# One line per record: partition, offset, key, key length, value, value length, headers.
FORMAT = r"%p|%o|%k|%K|%s|%S|%h\n"


@pytest.fixture(scope="module", autouse=True)
def kcat_installed():
    if shutil.which("kcat") is None:
        pytest.fail("kcat not installed; run compat-tests/setup/kcat.sh")


def kcat(*args, input=None, timeout=30) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *map(str, args)], input=input, text=True,
                          capture_output=True, timeout=timeout,
                          stdin=None if input is not None else subprocess.DEVNULL)


def describe(proc) -> str:
    return (f"{' '.join(proc.args)}\nexit code {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")


def metadata(bootstrap, topic) -> dict:
    proc = kcat("-L", "-J", "-b", bootstrap, "-t", topic)
    assert proc.returncode == 0, describe(proc)
    return json.loads(proc.stdout)


def wait_for_partitions(bootstrap, topic, count, timeout=10.0) -> dict:
    """Metadata of topic once it shows `count` partitions, each with a leader."""
    deadline = time.monotonic() + timeout
    while True:
        meta = metadata(bootstrap, topic)
        topics = [t for t in meta["topics"] if t["topic"] == topic]
        if topics and "error" not in topics[0] and len(topics[0]["partitions"]) == count \
                and all(p["leader"] >= 0 for p in topics[0]["partitions"]):
            return meta
        assert time.monotonic() < deadline, f"{topic} never showed {count} partitions: {meta}"
        time.sleep(0.2)


def produce(bootstrap, topic, lines, *extra):
    proc = kcat("-P", "-b", bootstrap, "-t", topic, *extra, input="".join(l + "\n" for l in lines))
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "", describe(proc)


def consume(bootstrap, topic, *extra) -> list:
    """Every record from the given start to the end of the partition(s), as FORMAT lines."""
    proc = kcat("-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", FORMAT, *extra)
    assert proc.returncode == 0, describe(proc)
    return proc.stdout.splitlines()


def test_metadata_lists_created_topic(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    kafka_tools.create_topic(b, topic_name, 3)
    meta = wait_for_partitions(b, topic_name, 3)

    assert len(meta["brokers"]) == 1
    broker = meta["brokers"][0]
    assert broker["name"] == f"{shared_runnel.host}:{shared_runnel.port}"
    assert meta["controllerid"] == broker["id"]
    [topic] = meta["topics"]
    assert topic["topic"] == topic_name
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["leader"] == broker["id"], p
        assert p["replicas"] == [{"id": broker["id"]}], p
        assert p["isrs"] == [{"id": broker["id"]}], p

    # The human-readable listing of all topics names it too.
    proc = kcat("-L", "-b", b)
    assert proc.returncode == 0, describe(proc)
    assert f'  topic "{topic_name}" with 3 partitions:\n' in proc.stdout, proc.stdout
    assert f"  broker {broker['id']} at {broker['name']}" in proc.stdout, proc.stdout
    for i in range(3):
        assert (f"    partition {i}, leader {broker['id']}, replicas: {broker['id']}, "
                f"isrs: {broker['id']}\n") in proc.stdout, proc.stdout


def test_produce_auto_creates_topic(shared_runnel, topic_name):
    """librdkafka's producer asks for auto-creation; the topic gets one partition."""
    b = shared_runnel.bootstrap
    produce(b, topic_name, ["first", "second"])
    meta = wait_for_partitions(b, topic_name, 1)
    assert meta["topics"][0]["partitions"][0]["partition"] == 0
    assert consume(b, topic_name, "-o", "beginning") == [
        "0|0||-1|first|5|", "0|1||-1|second|6|"]


def test_keys_and_headers_round_trip_in_order(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    kafka_tools.create_topic(b, topic_name, 1)
    wait_for_partitions(b, topic_name, 1)
    lines = [f"key-{i}:value {i} " + "x" * i for i in range(50)]
    produce(b, topic_name, lines, "-K:", "-H", "trace=abc", "-H", "n=1", "-p", "0")

    got = consume(b, topic_name, "-o", "beginning")
    want = [f"0|{i}|key-{i}|{len(f'key-{i}')}|value {i} {'x' * i}|{len(f'value {i} ') + i}"
            f"|trace=abc,n=1" for i in range(50)]
    assert got == want


def test_produce_to_specific_partition(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    kafka_tools.create_topic(b, topic_name, 3)
    wait_for_partitions(b, topic_name, 3)
    produce(b, topic_name, [f"two-{i}" for i in range(5)], "-p", "2")
    produce(b, topic_name, ["zero-0", "zero-1"], "-p", "0")

    assert consume(b, topic_name, "-p", "2", "-o", "beginning") == [
        f"2|{i}||-1|two-{i}|5|" for i in range(5)]
    assert consume(b, topic_name, "-p", "0", "-o", "beginning") == [
        "0|0||-1|zero-0|6|", "0|1||-1|zero-1|6|"]
    assert consume(b, topic_name, "-p", "1", "-o", "beginning") == []
    # Without -p kcat reads all partitions; per partition the order is the append order.
    every = consume(b, topic_name, "-o", "beginning")
    assert sorted(every) == sorted([f"2|{i}||-1|two-{i}|5|" for i in range(5)]
                                   + ["0|0||-1|zero-0|6|", "0|1||-1|zero-1|6|"])
    assert [l for l in every if l.startswith("2|")] == [f"2|{i}||-1|two-{i}|5|" for i in range(5)]


def test_consume_from_offset(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    kafka_tools.create_topic(b, topic_name, 1)
    wait_for_partitions(b, topic_name, 1)
    produce(b, topic_name, [f"k{i}:v{i}" for i in range(10)], "-K:")

    def expect(offsets):
        return [f"0|{i}|k{i}|2|v{i}|2|" for i in offsets]

    assert consume(b, topic_name, "-p", "0", "-o", "4") == expect(range(4, 10))
    assert consume(b, topic_name, "-p", "0", "-o", "9") == expect([9])
    # A negative offset counts back from the end (ListOffsets latest, then Fetch).
    assert consume(b, topic_name, "-p", "0", "-o", "-3") == expect(range(7, 10))
    # At the end: nothing, and kcat still exits cleanly.
    assert consume(b, topic_name, "-p", "0", "-o", "end") == []


def test_second_batch_continues_offsets(shared_runnel, topic_name):
    """Two producer sessions: offsets continue where the first left off."""
    b = shared_runnel.bootstrap
    kafka_tools.create_topic(b, topic_name, 1)
    wait_for_partitions(b, topic_name, 1)
    produce(b, topic_name, ["a", "b", "c"], "-p", "0")
    produce(b, topic_name, ["d", "e"], "-p", "0")
    assert consume(b, topic_name, "-o", "beginning") == [
        f"0|{i}||-1|{v}|1|" for i, v in enumerate("abcde")]
