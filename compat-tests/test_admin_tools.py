"""Apache Kafka 4.4's admin tools for producer state and features against the broker:
kafka-transactions describe-producers (DescribeProducers) and kafka-features describe
(ApiVersions' supported and finalized features), and kafka-log-dirs describe
(DescribeLogDirs).

Each tool is one JVM start (about a second here), so tests run as few as they need.
"""
import json
import re
import time

from kafka_tools import CONSOLE_PRODUCER, create_topic, describe, run_tool
from test_kafka_tools import murmur2_partition

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh

PRODUCERS_HEADER = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset"]


def describe_producers(bootstrap: str, topic: str, partition: int):
    proc = run_tool(TRANSACTIONS, "--bootstrap-server", bootstrap, "describe-producers",
                    "--topic", topic, "--partition", partition)
    assert proc.returncode == 0, describe(proc)
    rows = [[cell.strip() for cell in line.split("\t") if cell.strip()]
            for line in proc.stdout.splitlines()]
    assert rows and rows[0] == PRODUCERS_HEADER, describe(proc)
    return rows[1:]


def test_describe_producers_after_an_idempotent_producer(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 2)
    assert describe_producers(b, topic_name, 0) == []
    started_ms = int(time.time() * 1000)
    # The Java producer is idempotent by default: one producer id, and per partition
    # sequences 0..n-1 for its n records.
    keys = [f"key-{i}" for i in range(10)]
    per_partition = [sum(murmur2_partition(k.encode(), 2) == p for k in keys) for p in (0, 1)]
    assert all(per_partition), per_partition
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", b, "--topic", topic_name,
                    "--reader-property", "parse.key=true",
                    "--reader-property", "key.separator=:",
                    input="".join(f"{k}:v\n" for k in keys))
    assert proc.returncode == 0 and proc.stderr == "", describe(proc)
    ended_ms = int(time.time() * 1000)
    seen = {}
    for partition in (0, 1):
        rows = describe_producers(b, topic_name, partition)
        assert len(rows) == 1, rows
        producer_id, epoch, coordinator_epoch, last_sequence, last_ts, txn_start = rows[0]
        assert int(producer_id) >= 0 and epoch == "0", rows
        assert coordinator_epoch == "-1" and txn_start == "None", rows
        assert started_ms <= int(last_ts) <= ended_ms, (rows, started_ms, ended_ms)
        seen[partition] = (producer_id, int(last_sequence))
    assert seen[0][0] == seen[1][0], seen
    assert [seen[p][1] for p in (0, 1)] == [n - 1 for n in per_partition], (seen, per_partition)


FEATURES = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh


def features(bootstrap: str, *args: str):
    return run_tool(FEATURES, "--bootstrap-server", bootstrap, *args)


def feature_rows(stdout: str) -> dict:
    """`kafka-features describe` lines as {feature: {field: value}}."""
    rows = {}
    for line in stdout.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        rows[fields.pop("Feature")] = fields
    return rows


def test_features_describe_and_refused_upgrade(shared_runnel):
    b = shared_runnel.bootstrap
    proc = features(b, "describe")
    assert proc.returncode == 0 and proc.stderr == "", describe(proc)
    rows = feature_rows(proc.stdout)
    assert sorted(rows) == sorted([
        "eligible.leader.replicas.version", "group.version", "kraft.version", "metadata.version",
        "share.version", "streams.version", "transaction.version"]), describe(proc)
    assert {k: v for k, v in rows["metadata.version"].items() if k != "Epoch"} == {
        "SupportedMinVersion": "4.1-IV1", "SupportedMaxVersion": "4.1-IV1",
        "FinalizedVersionLevel": "4.1-IV1"}, describe(proc)
    # No KIP-848 groups and no KIP-890 transactions: those features stay at 0.
    for name in ("group.version", "transaction.version"):
        assert rows[name]["SupportedMaxVersion"] == rows[name]["FinalizedVersionLevel"] == "0", rows[name]
    assert int(rows["metadata.version"]["Epoch"]) >= 0
    # The voters are in the metadata log and can change (KIP-853).
    assert rows["kraft.version"]["FinalizedVersionLevel"] == "1", rows["kraft.version"]
    # Eligible leader replicas (KIP-966) are kept, as in a new Kafka 4.1+ cluster.
    elr = rows["eligible.leader.replicas.version"]
    assert elr["FinalizedVersionLevel"] == elr["SupportedMaxVersion"] == "1", elr

    # Setting the level it already has is accepted; a level it lacks is refused.
    proc = features(b, "upgrade", "--feature", "metadata.version=27")
    assert proc.returncode == 0 and proc.stdout == "metadata.version was upgraded to 27.\n", describe(proc)
    proc = features(b, "upgrade", "--feature", "group.version=1")
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout.startswith(
        "Could not upgrade group.version to 1. The update failed for all features since the "
        "following feature had an error: Invalid update version 1 for feature group.version."), describe(proc)


def test_eligible_leader_replicas_are_turned_off_and_on_again(shared_runnel):
    """KIP-966's feature is the one level an operator changes: `downgrade` to 0 goes back
    to the ISR rule before ELR, `upgrade` to 1 returns to ELR. (What it does to partitions
    is in cluster/test_eligible_leaders.py; the refusals, which the tool would not send, in
    tests/api_versions_matrix.rs.)"""
    b = shared_runnel.bootstrap
    elr = "eligible.leader.replicas.version"
    try:
        proc = features(b, "downgrade", "--feature", f"{elr}=0")
        assert proc.returncode == 0 and proc.stdout == f"{elr} was downgraded to 0.\n", describe(proc)
        row = feature_rows(features(b, "describe").stdout)[elr]
        assert (row["SupportedMaxVersion"], row["FinalizedVersionLevel"]) == ("1", "0"), row
    finally:
        proc = features(b, "upgrade", "--feature", f"{elr}=1")
    assert proc.returncode == 0 and proc.stdout == f"{elr} was upgraded to 1.\n", describe(proc)
    assert feature_rows(features(b, "describe").stdout)[elr]["FinalizedVersionLevel"] == "1"


LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"  # kafka-log-dirs.sh


def test_log_dirs_describe_shows_each_partition_and_its_size(shared_runnel, topic_name):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, 2)
    # Keyed records, so that both partitions get some (see the test above).
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", b, "--topic", topic_name,
                    "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                    input="".join(f"key-{i}:value-{i}\n" for i in range(10)))
    assert proc.returncode == 0, describe(proc)
    proc = run_tool(LOG_DIRS, "--bootstrap-server", b, "--describe", "--topic-list", topic_name)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information", describe(proc)
    assert lines[1].startswith("Received log directory information from brokers "), describe(proc)
    info = json.loads(next(line for line in lines if line.startswith("{")))
    assert info["version"] == 1 and len(info["brokers"]) == 1, info
    dirs = info["brokers"][0]["logDirs"]
    assert len(dirs) == 1 and dirs[0]["error"] is None and dirs[0]["logDir"], dirs
    parts = {p["partition"]: p for p in dirs[0]["partitions"]}
    assert set(parts) == {f"{topic_name}-0", f"{topic_name}-1"}, parts
    for p in parts.values():
        assert p["size"] > 0 and p["offsetLag"] == 0 and p["isFuture"] is False, p
    if not shared_runnel.external:
        # The sizes are the partitions' segment files on disk.
        for name, p in parts.items():
            on_disk = sum(f.stat().st_size for f in (shared_runnel.data_dir / name).glob("*.log"))
            assert p["size"] == on_disk, (name, p, on_disk)
        assert dirs[0]["logDir"] == str(shared_runnel.data_dir.resolve()) or \
            dirs[0]["logDir"] == str(shared_runnel.data_dir), dirs[0]["logDir"]
