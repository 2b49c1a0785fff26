"""Two log dirs on one broker, runnel and Kafka 4.4 side by side: kafka-log-dirs --describe
and kafka-reassign-partitions moving a partition between the dirs (--execute, --verify)
must tell the same story: the same dirs-and-partitions shape, the same tool output once
paths and topic names are normalised, and the partition in its new dir afterwards.

Kafka runs here as a second reference broker of its own (reference-kafka.sh with
REFERENCE_KAFKA_LOG_DIRS=2 on port 19096), started and stopped by this module, so the
suite's shared one-dir reference broker is untouched.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import RunnelProcess  # compat-tests/conftest.py
from kafka_tools import CONSOLE_PRODUCER, create_topic, describe, run_tool

from .conftest import REF_SCRIPT, _kafka_unavailable

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"  # kafka-log-dirs.sh
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
PORT = os.environ.get("DIFFERENTIAL_KAFKA_LOG_DIRS_PORT", "19096")


@pytest.fixture(scope="module")
def two_dir_kafka():
    if os.environ.get("DIFFERENTIAL_KAFKA", "1") == "0":
        pytest.skip("DIFFERENTIAL_KAFKA=0")
    env = dict(os.environ, REFERENCE_KAFKA_LOG_DIRS="2")
    started = subprocess.run([str(REF_SCRIPT), "start", PORT], capture_output=True, text=True, timeout=600, env=env)
    if started.returncode != 0:
        _kafka_unavailable(f"two-dir reference Kafka: {started.stderr.strip()[-500:]}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(REF_SCRIPT), "stop", PORT], capture_output=True, text=True, timeout=90)


@pytest.fixture(scope="module")
def two_dir_runnel(tmp_path_factory):
    root = tmp_path_factory.mktemp("log-dirs")
    proc = RunnelProcess(root / "data", extra_args=["--log-dirs", f"{root / 'data'},{root / 'data2'}"])
    proc.start()
    try:
        yield proc.bootstrap
    finally:
        proc.kill()


def log_dirs(bootstrap, topic):
    proc = run_tool(LOG_DIRS, "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic)
    assert proc.returncode == 0, describe(proc)
    info = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    [broker] = info["brokers"]
    return {d["logDir"]: d for d in broker["logDirs"]}


def scenario(bootstrap, topic, plan_path):
    """What a client sees: the dirs before, the tools' output, the dirs after (normalised)."""
    create_topic(bootstrap, topic, 2)
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
                    "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                    input="".join(f"key-{i}:value-{i}\n" for i in range(20)))
    assert proc.returncode == 0, describe(proc)
    before = log_dirs(bootstrap, topic)
    dirs = sorted(before)
    alias = {d: f"DIR{i}" for i, d in enumerate(dirs)}
    where = {p["partition"]: d for d, e in before.items() for p in e["partitions"]}
    source = where[f"{topic}-0"]
    dest = next(d for d in dirs if d != source)
    plan_path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [dest]}]}))

    def norm(text):
        # Longest first: one dir's path may be a prefix of another's (data, data2).
        for d in sorted(alias, key=len, reverse=True):
            text = text.replace(d, alias[d])
        return text.replace(topic, "TOPIC")

    execute = run_tool(REASSIGN, "--bootstrap-server", bootstrap, "--reassignment-json-file", plan_path, "--execute")
    assert execute.returncode == 0, describe(execute)
    verify = None
    for _ in range(120):
        verify = run_tool(REASSIGN, "--bootstrap-server", bootstrap, "--reassignment-json-file", plan_path, "--verify")
        if verify.returncode == 0 and "completed successfully" in verify.stdout:
            break
        time.sleep(0.5)
    after = log_dirs(bootstrap, topic)
    shape = lambda dirs_info: sorted(  # noqa: E731
        (alias[d], p["partition"].replace(topic, "TOPIC"), p["isFuture"], p["offsetLag"], p["size"] > 0)
        for d, e in dirs_info.items() for p in e["partitions"])
    errors = sorted((alias[d], e["error"]) for d, e in after.items())
    return {
        "before": shape(before),
        "moved_to_other_dir": alias[dest] != alias[source],
        "after": shape(after),
        "errors": errors,
        # The current-assignment JSON carries each replica's dir ("any" when it stays).
        "execute": norm(execute.stdout),
        "verify": norm(verify.stdout),
        "verify_rc": verify.returncode,
    }


def test_log_dirs_describe_and_a_move_between_dirs_match_kafka(two_dir_kafka, two_dir_runnel, tmp_path):
    kafka = scenario(two_dir_kafka, "logdirs-diff", tmp_path / "kafka-plan.json")
    runnel = scenario(two_dir_runnel, "logdirs-diff", tmp_path / "runnel-plan.json")
    assert kafka["moved_to_other_dir"] and "completed successfully" in kafka["verify"], kafka
    assert runnel == kafka
