"""Several log directories on one runnel broker (--log-dirs), driven by Kafka's own tools:
kafka-log-dirs --describe lists every directory with its partitions, and
kafka-reassign-partitions moves a partition to another directory ("log_dirs" in the plan)
with --execute, then --verify reports it completed, while the records stay readable.
With --replica-alter-log-dirs-throttle the move copies a chunk and waits until the broker's
rate is lifted.
"""

import json
import time

import pytest

from conftest import RunnelProcess
from kafka_tools import (
    CONFIGS, CONSOLE_CONSUMER, CONSOLE_PRODUCER, PRODUCER_PERF_TEST, create_topic, describe, run_tool,
)

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"  # kafka-log-dirs.sh
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh


@pytest.fixture
def two_dir_runnel(tmp_path):
    first, second = tmp_path / "data", tmp_path / "disk2"
    broker = RunnelProcess(first, extra_args=["--log-dirs", f"{first},{second}"])
    broker.start()
    try:
        yield broker, [first.resolve(), second.resolve()]
    finally:
        broker.kill()


def log_dirs_json(bootstrap: str, topic: str) -> dict:
    proc = run_tool(LOG_DIRS, "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic)
    assert proc.returncode == 0, describe(proc)
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))


def produce(bootstrap: str, topic: str, values):
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
                    input="".join(f"{v}\n" for v in values))
    assert proc.returncode == 0, describe(proc)


def wait_verified(bootstrap: str, plan, topic: str):
    """kafka-reassign-partitions --verify, until it says the move of partition 0 completed."""
    for _ in range(60):
        proc = run_tool(REASSIGN, "--bootstrap-server", bootstrap, "--reassignment-json-file", plan, "--verify")
        if proc.returncode == 0 and f"Reassignment of replica {topic}-0-1 completed successfully." in proc.stdout:
            return proc
        time.sleep(0.5)
    raise AssertionError(describe(proc))


def test_log_dirs_describe_and_a_reassign_partitions_move_between_dirs(two_dir_runnel, topic_name, tmp_path):
    broker, dirs = two_dir_runnel
    b = broker.bootstrap
    create_topic(b, topic_name, 2)
    produce(b, topic_name, [f"before-{i}" for i in range(20)])

    info = log_dirs_json(b, topic_name)
    listed = {d["logDir"]: d for d in info["brokers"][0]["logDirs"]}
    assert set(listed) == {str(d) for d in dirs}, listed
    # One partition in each directory (a new one goes to the dir with the fewest).
    where = {p["partition"]: d for d, entry in listed.items() for p in entry["partitions"]}
    assert sorted(where) == [f"{topic_name}-0", f"{topic_name}-1"], where
    assert len(set(where.values())) == 2, where
    source = where[f"{topic_name}-0"]
    dest = next(str(d) for d in dirs if str(d) != source)

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1], "log_dirs": [dest]}]}))
    proc = run_tool(REASSIGN, "--bootstrap-server", b, "--reassignment-json-file", plan, "--execute")
    assert proc.returncode == 0, describe(proc)
    produce(b, topic_name, [f"during-{i}" for i in range(20)])

    wait_verified(b, plan, topic_name)
    info = log_dirs_json(b, topic_name)
    listed = {d["logDir"]: {p["partition"] for p in d["partitions"]} for d in info["brokers"][0]["logDirs"]}
    assert f"{topic_name}-0" in listed[dest] and f"{topic_name}-0" not in listed[source], listed
    assert (dirs[0] / f"{topic_name}-0").exists() != (dirs[1] / f"{topic_name}-0").exists()

    proc = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name, "--from-beginning",
                    "--max-messages", "40", "--timeout-ms", "20000")
    assert proc.returncode == 0, describe(proc)
    got = proc.stdout.splitlines()
    assert sorted(got) == sorted([f"before-{i}" for i in range(20)] + [f"during-{i}" for i in range(20)]), got


@pytest.mark.parametrize("interrupted", [None, "stop", "kill"],
                         ids=["", "across-a-restart", "across-a-kill"])
def test_a_throttled_move_between_dirs_waits_until_the_throttle_is_lifted(two_dir_runnel, topic_name, tmp_path,
                                                                         interrupted):
    """With `interrupted`, the broker stops (SIGTERM) or dies (SIGKILL) while the move is
    held, and starts again: the move is taken up again, as Kafka resumes its future log."""
    broker, dirs = two_dir_runnel
    b = broker.bootstrap
    create_topic(b, topic_name, 1)
    # 4 MB: four chunks of the copy; the first is copied, then the 10 kB/s bound holds it.
    proc = run_tool(PRODUCER_PERF_TEST, "--topic", topic_name, "--num-records", "400", "--record-size", "10000",
                    "--throughput", "-1", "--producer-props", f"bootstrap.servers={b}", timeout=120)
    assert proc.returncode == 0, describe(proc)
    source = next(d for d in dirs if (d / f"{topic_name}-0").exists())
    dest = next(d for d in dirs if d != source)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1], "log_dirs": [str(dest)]}]}))
    proc = run_tool(REASSIGN, "--bootstrap-server", b, "--reassignment-json-file", plan, "--execute",
                    "--replica-alter-log-dirs-throttle", "10000")
    assert proc.returncode == 0, describe(proc)
    assert "The replica-alter-dir throttle limit was set to 10000 B/s" in proc.stdout, describe(proc)
    proc = run_tool(CONFIGS, "--bootstrap-server", b, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert "replica.alter.log.dirs.io.max.bytes.per.second=10000 sensitive=false" in proc.stdout, describe(proc)

    future = dest / f"{topic_name}-0-future"
    deadline = time.monotonic() + 30
    while not (future.exists() and any(f.stat().st_size for f in future.glob("*.log"))):
        assert time.monotonic() < deadline, "the move never started copying"
        time.sleep(0.2)
    time.sleep(3)
    copied = sum(f.stat().st_size for f in future.glob("*.log"))
    full = sum(f.stat().st_size for f in (source / f"{topic_name}-0").glob("*.log"))
    assert copied < full // 2, f"the throttled move copied {copied} of {full} bytes"
    in_progress = f"Reassignment of replica {topic_name}-0-1 is still in progress."
    proc = run_tool(REASSIGN, "--bootstrap-server", b, "--reassignment-json-file", plan, "--verify")
    assert in_progress in proc.stdout, describe(proc)

    if interrupted:
        if interrupted == "stop":
            broker.stop()
        else:
            broker.kill()
        assert future.exists(), "the copy made so far is kept"
        broker.start()
        assert "resuming a move between log dirs" in broker.log_text()
        proc = run_tool(REASSIGN, "--bootstrap-server", b, "--reassignment-json-file", plan, "--verify")
        assert in_progress in proc.stdout, describe(proc)

    proc = run_tool(CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                    "--delete-config", "replica.alter.log.dirs.io.max.bytes.per.second")
    assert proc.returncode == 0, describe(proc)
    wait_verified(b, plan, topic_name)
    assert (dest / f"{topic_name}-0").exists() and not (source / f"{topic_name}-0").exists()
    assert sum(f.stat().st_size for f in (dest / f"{topic_name}-0").glob("*.log")) == full
