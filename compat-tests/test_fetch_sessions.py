"""KIP-227 incremental fetch sessions with real clients: the Java consumer (Kafka's
kafka-console-consumer) and franz-go open a session with their first Fetch and name only
what changed afterwards. Each reads a 4-partition topic while records arrive in two waves,
and must get every record once, in each partition's order; the broker's /metrics must show
that its fetches were served from sessions (librdkafka does not use sessions)."""
import json
import subprocess
import time

import pytest

from kafka_tools import CONSOLE_CONSUMER, describe, tool_command
from test_confluent_kafka import create_topic, produce_all
from test_franz_go import franz  # noqa: F401  (the fixture)
from test_metrics_http import http_get, parse_exposition, sample

PARTITIONS = 4
WAVE = 60
TIMEOUT = 60.0


def session_stats(broker):
    status, body = http_get(broker, "/metrics")
    assert status == 200
    samples = parse_exposition(body)
    return sample(samples, "incremental_fetches_total"), sample(samples, "fetch_sessions")


def wave(broker, topic, tag):
    """WAVE records per partition, valued `{tag}-{partition}-{i}`, in order."""
    records = [(p, None, f"{tag}-{p}-{i}".encode(), None, None)
               for i in range(WAVE) for p in range(PARTITIONS)]
    reports = produce_all(broker.bootstrap, topic, records)
    assert all(err is None for err, _, _ in reports), reports[:5]


def expected_values(partition):
    return [f"{tag}-{partition}-{i}" for tag in ("first", "second") for i in range(WAVE)]


def read_in_two_waves(broker, topic, consumer_cmd):
    """Starts the consumer after the first wave, waits until the broker served it
    incremental fetches, sends the second wave; returns (exit code, stdout, stderr)."""
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    before, _ = session_stats(broker)
    wave(broker, topic, "first")
    proc = subprocess.Popen(consumer_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        deadline = time.time() + TIMEOUT
        while True:
            incremental, sessions = session_stats(broker)
            if incremental > before and sessions >= 1:
                break
            assert proc.poll() is None, f"the consumer exited early: {proc.communicate()[1][-2000:]}"
            assert time.time() < deadline, "no incremental fetch was served"
            time.sleep(0.2)
        wave(broker, topic, "second")
        out, err = proc.communicate(timeout=TIMEOUT)
        # Sessions kept serving after the second wave too.
        assert session_stats(broker)[0] > incremental
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def test_the_java_consumer_reads_everything_through_a_fetch_session(runnel, topic_name):
    if runnel.external:
        pytest.skip("needs runnel's HTTP listener")
    total = 2 * WAVE * PARTITIONS
    cmd = tool_command(CONSOLE_CONSUMER, "--bootstrap-server", runnel.bootstrap, "--topic", topic_name,
                       "--from-beginning", "--max-messages", total, "--timeout-ms", int(TIMEOUT * 1000),
                       "--formatter-property", "print.partition=true")
    code, out, err = read_in_two_waves(runnel, topic_name, cmd)
    assert code == 0, describe(subprocess.CompletedProcess(cmd, code, out, err))
    by_partition = {p: [] for p in range(PARTITIONS)}
    for line in out.splitlines():
        partition, value = line.split("\t", 1)
        by_partition[int(partition.removeprefix("Partition:"))].append(value)
    for p in range(PARTITIONS):
        assert by_partition[p] == expected_values(p), f"partition {p}"


def test_franz_go_reads_everything_through_a_fetch_session(runnel, topic_name, franz):  # noqa: F811
    if runnel.external:
        pytest.skip("needs runnel's HTTP listener")
    total = 2 * WAVE * PARTITIONS
    cmd = [franz, "consume", "-brokers", runnel.bootstrap, "-topic", topic_name, "-n", str(total),
           "-timeout", f"{int(TIMEOUT)}s"]
    code, out, err = read_in_two_waves(runnel, topic_name, cmd)
    assert code == 0, err[-3000:]
    by_partition = {p: [] for p in range(PARTITIONS)}
    for line in out.splitlines():
        r = json.loads(line)
        by_partition[r["partition"]].append((r["offset"], r["value"]))
    for p in range(PARTITIONS):
        assert [v for _, v in by_partition[p]] == expected_values(p), f"partition {p}"
        assert [o for o, _ in by_partition[p]] == list(range(2 * WAVE)), f"partition {p}"
