"""`runnel topic|group|cluster`, the admin CLI, as a client of runnel and of the reference
Apache Kafka 4.4 broker (compat-tests/reference-kafka.sh on 127.0.0.1:19092).

The same round trip runs on both brokers (create, describe, produce, consume with a group,
group describe, seek, delete), and Kafka's own tools check what the CLI reports:
kafka-consumer-groups --describe agrees with `runnel group describe`, kafka-topics
--describe with `runnel topic describe`, kafka-console-consumer reads what `runnel topic
produce` wrote. Kafka is started when it is not running (and stopped at the end only
then); when it cannot start, its half is skipped locally and fails in CI (CI=true).
"""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from conftest import RunnelProcess, runnel_bin
from kafka_tools import CONSOLE_CONSUMER, CONSUMER_GROUPS, TOPICS, describe, run_tool

REF_SCRIPT = Path(__file__).resolve().parent / "reference-kafka.sh"
KAFKA_PORT = os.environ.get("DIFFERENTIAL_KAFKA_PORT", "19092")


def _ref(cmd, timeout):
    return subprocess.run([str(REF_SCRIPT), cmd, KAFKA_PORT], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def kafka_bootstrap():
    """The reference broker's bootstrap, or "SKIP: reason"."""
    if os.environ.get("DIFFERENTIAL_KAFKA", "1") == "0":
        yield "SKIP: DIFFERENTIAL_KAFKA=0"
        return
    status = _ref("status", 30)
    if status.returncode == 0:
        yield status.stdout.strip()
        return
    try:
        started = _ref("start", 600)
    except (OSError, subprocess.TimeoutExpired) as e:
        yield f"SKIP: reference Kafka could not start: {e}"
        return
    if started.returncode != 0:
        yield "SKIP: reference Kafka unavailable: " + (started.stderr.strip().splitlines() or ["?"])[-1]
        return
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        _ref("stop", 60)


@pytest.fixture(scope="module")
def runnel_bootstrap(tmp_path_factory):
    proc = RunnelProcess(tmp_path_factory.mktemp("admin-cli") / "data")
    proc.start()
    try:
        yield proc.bootstrap
    finally:
        proc.kill()


@pytest.fixture(params=["runnel", "kafka"])
def bootstrap(request):
    if request.param == "runnel":
        return request.getfixturevalue("runnel_bootstrap")
    b = request.getfixturevalue("kafka_bootstrap")
    if b.startswith("SKIP:"):
        if os.environ.get("CI") == "true" and os.environ.get("DIFFERENTIAL_KAFKA", "1") != "0":
            pytest.fail(f"reference Kafka is required in CI: {b[5:].strip()}")
        pytest.skip(b[5:].strip())
    return b


def cli(bootstrap, *args, input="", timeout=60):
    return subprocess.run([runnel_bin(), *args, "--brokers", bootstrap], input=input, text=True,
                          capture_output=True, timeout=timeout)


def ok(bootstrap, *args, input=""):
    r = cli(bootstrap, *args, input=input)
    assert r.returncode == 0, f"runnel {' '.join(args)}: exit {r.returncode}\n{r.stderr}"
    return r


def ok_json(bootstrap, *args, input=""):
    return json.loads(ok(bootstrap, *args, "--format", "json", input=input).stdout)


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def offsets_of(described):
    return {(o["topic"], o["partition"]): (o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in described["offsets"]}


def test_round_trip(bootstrap):
    topic, group = name("cli"), name("g")
    created = ok_json(bootstrap, "topic", "create", topic, "-p", "2", "-r", "1", "-c", "retention.ms=3600000")
    assert created["topic"] == topic
    again = cli(bootstrap, "topic", "create", topic)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr, again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr

    assert topic in [t["name"] for t in ok_json(bootstrap, "topic", "list")["topics"]]
    lines = "".join(f"k{i % 5}:v{i}\n" for i in range(100))
    produced = ok_json(bootstrap, "topic", "produce", topic, "--key-separator", ":", input=lines)
    assert produced["records"] == 100

    described = ok_json(bootstrap, "topic", "describe", topic)
    parts = described["partitions"]
    assert [p["partition"] for p in parts] == [0, 1]
    assert sum(p["high_watermark"] for p in parts) == 100
    assert all(p["log_start_offset"] == 0 and p["leader"] in p["isr"] for p in parts)
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"

    out = ok(bootstrap, "topic", "consume", topic, "--num", "100", "--group", group, "--format", "json").stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted(int(r["value"][1:]) for r in records) == list(range(100))
    by_key = {}
    for r in records:
        assert by_key.setdefault(r["key"], r["partition"]) == r["partition"]

    g = ok_json(bootstrap, "group", "describe", group)
    offs = offsets_of(g)
    assert g["members"] == [] and all(lag == 0 for (_, _, lag) in offs.values()), g
    assert sum(c for (c, _, _) in offs.values()) == 100
    assert group in [x["group"] for x in ok_json(bootstrap, "group", "list")["groups"]]

    ok(bootstrap, "group", "seek", group, "--to", "start", "--topic", topic)
    offs = offsets_of(ok_json(bootstrap, "group", "describe", group))
    assert all(c == 0 for (c, _, _) in offs.values()) and sum(lag for (_, _, lag) in offs.values()) == 100
    # Consuming with the group again resumes at the new position.
    again = ok(bootstrap, "topic", "consume", topic, "--num", "100", "--group", group).stdout
    assert len(again.splitlines()) == 100

    ok(bootstrap, "group", "delete", group)
    assert group not in [x["group"] for x in ok_json(bootstrap, "group", "list")["groups"]]
    ok(bootstrap, "topic", "delete", topic)
    gone = cli(bootstrap, "topic", "describe", topic)
    assert gone.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr, gone.stderr


def kafka_table(text, first="GROUP"):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [first]:
            header = line.split()
            return [dict(zip(header, row.split())) for row in lines[i + 1:] if row.strip()]
    return []


def test_group_describe_and_seek_agree_with_kafka_consumer_groups(bootstrap):
    topic, group = name("agree"), name("g")
    ok(bootstrap, "topic", "create", topic, "-p", "3")
    for p in range(3):
        ok(bootstrap, "topic", "produce", topic, "--partition", str(p), input="".join(f"{p}-{i}\n" for i in range(10)))
    ok(bootstrap, "topic", "consume", topic, "--partition", "1", "--num", "4", "--group", group)
    ok(bootstrap, "group", "seek", group, "--to", "7", "--topic", topic)
    ours = offsets_of(ok_json(bootstrap, "group", "describe", group))
    assert ours == {(topic, p): (7, 10, 3) for p in range(3)}, ours

    proc = run_tool(CONSUMER_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group, check=True)
    theirs = {(r["TOPIC"], int(r["PARTITION"])): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"]))
              for r in kafka_table(proc.stdout)}
    assert theirs == ours, describe(proc)

    topics = run_tool(TOPICS, "--bootstrap-server", bootstrap, "--describe", "--topic", topic, check=True)
    assert topics.stdout.count("Partition: ") == len(ok_json(bootstrap, "topic", "describe", topic)["partitions"])


def test_what_runnel_produces_kafka_console_consumer_reads(bootstrap):
    topic = name("console")
    ok(bootstrap, "topic", "create", topic, "-p", "1")
    ok(bootstrap, "topic", "produce", topic, "--key-separator", "=", input="a=1\nb=2\nc=3\n")
    proc = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
                    "--max-messages", "3", "--formatter-property", "print.key=true", "--formatter-property", "key.separator==",
                    timeout=60, check=True)
    assert proc.stdout.splitlines() == ["a=1", "b=2", "c=3"], describe(proc)


def test_seek_and_delete_are_refused_while_the_group_has_members(bootstrap):
    topic, group = name("busy"), name("g")
    ok(bootstrap, "topic", "create", topic, "-p", "1")
    ok(bootstrap, "topic", "produce", topic, input="x\n")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 30000})
    try:
        consumer.subscribe([topic])
        deadline = time.time() + 30
        while time.time() < deadline and not consumer.assignment():
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer never got its partition"
        g = ok_json(bootstrap, "group", "describe", group)
        assert len(g["members"]) == 1 and g["members"][0]["assignment"] == [{"topic": topic, "partition": 0}], g
        refused = cli(bootstrap, "group", "seek", group, "--to", "start", "--topic", topic)
        assert refused.returncode == 1 and "active member" in refused.stderr, refused.stderr
        deleted = cli(bootstrap, "group", "delete", group)
        assert deleted.returncode == 1 and "NON_EMPTY_GROUP" in deleted.stderr, deleted.stderr
    finally:
        consumer.close()


def test_cluster_info(bootstrap):
    info = ok_json(bootstrap, "cluster", "info")
    assert info["cluster_id"]
    assert bootstrap in [b["address"] for b in info["brokers"]]
    assert "CLUSTER" in ok(bootstrap, "cluster", "info").stdout


def test_usage_and_connection_errors():
    for args in (["topic", "create", "t", "-c", "novalue"], ["topic", "consume", "t", "--offset", "later"],
                 ["group", "seek", "g", "--to", "start"], ["topic"]):
        r = subprocess.run([runnel_bin(), *args], capture_output=True, text=True, timeout=20)
        assert r.returncode == 2, (args, r.stderr)
    r = subprocess.run([runnel_bin(), "cluster", "info", "--brokers", "127.0.0.1:1"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1 and r.stderr.startswith("runnel: cannot reach 127.0.0.1:1"), r.stderr
    help_text = subprocess.run([runnel_bin(), "--help"], capture_output=True, text=True, timeout=20).stdout
    for verb in ("topic", "group", "cluster"):
        assert verb in help_text
