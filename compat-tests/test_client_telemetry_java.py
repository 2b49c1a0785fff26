"""KIP-714 client telemetry with the real Java client (Kafka 4.4 kafka-clients).

Subscriptions are made with Kafka's own tools, `kafka-client-metrics.sh` and
`kafka-configs.sh --entity-type client-metrics`, and read back with both (and again after a restart); then a Java
producer and a Java consumer in a group that leaves most of the topic unread push their
metrics (every second), and `/metrics` shows the consumer's records-lag-max (labelled
with its client id and group id) and the producer's request latency.
"""
import math
import time
import uuid

import pytest

from kafka_tools import CONFIGS, CONSOLE_CONSUMER, PRODUCER_PERF_TEST, run_tool
from test_metrics_http import http_get, parse_exposition

CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"  # kafka-client-metrics.sh
TIMEOUT = 60.0
LAG_MAX = "client_telemetry_org_apache_kafka_consumer_fetch_manager_records_lag_max"
REQUEST_LATENCY = "client_telemetry_org_apache_kafka_producer_request_latency_avg"


def samples_of(samples, name, **labels):
    """The values of `name` whose labels include `labels`."""
    return [v for (n, ls), v in samples.items()
            if n == name and all((k, v2) in ls for k, v2 in labels.items())]


def test_java_clients_push_lag_and_latency(runnel, topic_name):
    if runnel.external:
        pytest.skip("needs runnel's HTTP listener")
    b = runnel.bootstrap
    tag = uuid.uuid4().hex[:8]
    producer_id, consumer_id, group = f"tel-p-{tag}", f"tel-c-{tag}", f"tel-g-{tag}"

    # One subscription per tool; a client gets the union of those it matches.
    run_tool(CLIENT_METRICS, "--bootstrap-server", b, "--alter", "--name", "consumers",
             "--metrics", "org.apache.kafka.consumer.fetch.manager.", "--interval", "1000",
             "--match", f"client_id={consumer_id}", check=True)
    run_tool(CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "client-metrics",
             "--entity-name", "producers", "--add-config",
             "metrics=[org.apache.kafka.producer.request.,org.apache.kafka.producer.record.],interval.ms=1000,"
             "match=[client_id=tel-p-.*,client_software_name=apache-kafka-java]", check=True)
    listed = run_tool(CLIENT_METRICS, "--bootstrap-server", b, "--list", check=True).stdout.split()
    assert sorted(listed) == ["consumers", "producers"]
    described = run_tool(CONFIGS, "--bootstrap-server", b, "--describe", "--entity-type", "client-metrics",
                         "--entity-name", "consumers", check=True).stdout
    assert "interval.ms=1000" in described and "metrics=org.apache.kafka.consumer.fetch.manager." in described
    described = run_tool(CLIENT_METRICS, "--bootstrap-server", b, "--describe", "--name", "producers",
                         check=True).stdout
    assert "match=client_id=tel-p-.*,client_software_name=apache-kafka-java" in described, described
    # Kafka refuses an interval outside 100..3600000 ms.
    bad = run_tool(CLIENT_METRICS, "--bootstrap-server", b, "--alter", "--name", "bad", "--interval", "5")
    assert bad.returncode != 0 and "interval must be between 100 and 3600000" in bad.stdout + bad.stderr

    # A producer that lives a few seconds (several pushes), then a consumer in a group
    # that reads 100 of the 3000 records in small fetches and leaves.
    run_tool(PRODUCER_PERF_TEST, "--topic", topic_name, "--num-records", "3000", "--record-size", "100",
             "--throughput", "600", "--producer-props", f"bootstrap.servers={b}", f"client.id={producer_id}",
             timeout=120, check=True)
    run_tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name, "--group", group,
             "--from-beginning", "--max-messages", "100", "--consumer-property", f"client.id={consumer_id}",
             "--consumer-property", "max.partition.fetch.bytes=2000", timeout=120, check=True)

    deadline = time.time() + TIMEOUT
    while True:
        status, text = http_get(runnel, "/metrics")
        assert status == 200
        samples = parse_exposition(text)
        lag = samples_of(samples, LAG_MAX, client_id=consumer_id, group_id=group, topic=topic_name,
                         partition="0")
        latency = samples_of(samples, REQUEST_LATENCY, client_id=producer_id)
        if (lag and latency) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert lag, f"no {LAG_MAX} of {consumer_id}:\n" + "\n".join(l for l in text.splitlines() if consumer_id in l)
    # The group read 100 of 3000 records: the lag it saw is most of the topic.
    assert lag[0] >= 1000, lag
    assert latency and math.isfinite(latency[0]) and latency[0] >= 0, latency
    # Each client pushed only what its subscription asked for.
    assert not [k for k in samples if k[0].startswith("client_telemetry_org_apache_kafka_consumer_coordinator")
                and ("client_id", consumer_id) in k[1]]
    assert not [k for k in samples if k[0].startswith("client_telemetry_org_apache_kafka_producer_buffer")
                and ("client_id", producer_id) in k[1]]
    assert samples[("client_telemetry_instances", frozenset())] >= 2

    # Subscriptions are in the metadata log: a restarted broker still has them.
    runnel.restart()
    listed = run_tool(CLIENT_METRICS, "--bootstrap-server", b, "--list", check=True).stdout.split()
    assert sorted(listed) == ["consumers", "producers"]
    # Deleting every config of a subscription removes it, as in Kafka.
    run_tool(CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "client-metrics",
             "--entity-name", "consumers", "--delete-config", "metrics,interval.ms,match", check=True)
    listed = run_tool(CLIENT_METRICS, "--bootstrap-server", b, "--list", check=True).stdout.split()
    assert listed == ["producers"]
