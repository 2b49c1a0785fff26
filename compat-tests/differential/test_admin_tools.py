"""Kafka's admin tools for features and producer state against both brokers: the shape of
the answers must be Kafka's (the same features listed, the same refusal for an update the
broker cannot make, the same producer-state columns); levels differ by design (runnel
finalizes only metadata.version, at 4.1-IV1; see src/protocol/features.rs)."""
import re
import time

from kafka_tools import CONSOLE_PRODUCER, describe, run_tool

FEATURES = "org.apache.kafka.tools.FeatureCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"


def _describe_features(bootstrap):
    proc = run_tool(FEATURES, "--bootstrap-server", bootstrap, "describe")
    assert proc.returncode == 0, describe(proc)
    rows = {}
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        rows[fields.pop("Feature")] = fields
    return rows


def test_features_describe_lists_the_same_features(both):
    kafka, runnel = (_describe_features(both[b]) for b in ("kafka", "runnel"))
    assert sorted(kafka) == sorted(runnel)
    for rows in (kafka, runnel):
        assert rows["metadata.version"]["FinalizedVersionLevel"] == rows["metadata.version"]["SupportedMaxVersion"]
        # One epoch for the whole answer.
        assert len({r["Epoch"] for r in rows.values()}) == 1


def test_features_upgrade_past_the_supported_range_is_refused(bootstrap):
    """eligible.leader.replicas.version is 0-1 on both sides, so the refusal reads the same.
    (For a feature a node supports only at 0, such as runnel's group.version, Kafka's words
    are "does not support this feature.", as for an unknown one below.)"""
    elr = "eligible.leader.replicas.version"
    proc = run_tool(FEATURES, "--bootstrap-server", bootstrap, "upgrade", "--feature", f"{elr}=99")
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout.startswith(
        f"Could not upgrade {elr} to 99. The update failed for all features since the following "
        f"feature had an error: Invalid update version 99 for feature {elr}. Local controller "), describe(proc)
    assert proc.stdout.rstrip().endswith(" only supports versions 0-1"), describe(proc)
    proc = run_tool(FEATURES, "--bootstrap-server", bootstrap, "upgrade", "--feature", "no.such.version=1")
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout.rstrip().endswith("does not support this feature."), describe(proc)


def test_describe_producers_columns_and_values(bootstrap, topic):
    started_ms = int(time.time() * 1000)
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, input="a\nb\nc\n")
    assert proc.returncode == 0, describe(proc)
    proc = run_tool(TRANSACTIONS, "--bootstrap-server", bootstrap, "describe-producers",
                    "--topic", topic, "--partition", "0")
    assert proc.returncode == 0, describe(proc)
    header, *rows = [[c.strip() for c in line.split("\t") if c.strip()] for line in proc.stdout.splitlines()]
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                      "LastTimestamp", "CurrentTransactionStartOffset"]
    assert len(rows) == 1, rows
    _, epoch, coordinator_epoch, last_sequence, last_ts, txn_start = rows[0]
    assert (epoch, coordinator_epoch, last_sequence, txn_start) == ("0", "-1", "2", "None")
    assert started_ms <= int(last_ts) <= int(time.time() * 1000)
