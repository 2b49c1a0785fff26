"""The operator's monitoring kit against real programs: `promtool` checks and unit-tests
config/prometheus/alerts.yml; Debian's Prometheus server scrapes a runnel broker, loads
the alerts, and answers the consumer lag of a confluent-kafka group through its own HTTP
API; every query of the Grafana dashboard (config/grafana/runnel-dashboard.json) names
metrics runnel serves and evaluates without error in that Prometheus."""
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

REPO = Path(__file__).resolve().parent.parent
ALERTS = REPO / "config" / "prometheus" / "alerts.yml"
ALERTS_TEST = REPO / "config" / "prometheus" / "alerts_test.yml"
DASHBOARD = REPO / "config" / "grafana" / "runnel-dashboard.json"
TIMEOUT = 30.0

missing = [b for b in ("promtool", "prometheus") if shutil.which(b) is None]
needs_prometheus = pytest.mark.skipif(bool(missing), reason=f"{missing} not installed (setup/prometheus.sh)")


@needs_prometheus
def test_promtool_checks_and_unit_tests_the_alerts():
    out = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 9 rules found" in out.stdout
    out = subprocess.run(["promtool", "test", "rules", str(ALERTS_TEST)], capture_output=True, text=True,
                         timeout=60, cwd=ALERTS_TEST.parent)
    assert out.returncode == 0, out.stdout + out.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port, path, **params):
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]


def dashboard_queries():
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


@needs_prometheus
def test_prometheus_scrapes_runnel_and_answers_the_lag(runnel, topic_name, tmp_path):
    if runnel.external:
        pytest.skip("needs runnel's HTTP listener")
    # A group that read and committed 30 of 100 records: a lag of 70.
    producer = Producer({"bootstrap.servers": runnel.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    group = f"g-{topic_name}"
    consumer = Consumer({"bootstrap.servers": runnel.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic_name])
    seen, deadline = 0, time.monotonic() + TIMEOUT
    while seen < 30 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            seen += 1
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 30)], asynchronous=False)
    consumer.close()

    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {ALERTS}
scrape_configs:
  - job_name: runnel
    static_configs:
      - targets: ["127.0.0.1:{runnel.http_port}"]
""")
    log = open(tmp_path / "prometheus.log", "wb")
    server = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        query = f'consumer_lag_messages{{group="{group}",topic="{topic_name}",partition="0"}}'
        deadline, result = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            try:
                result = api(port, "query", query=query)["result"]
            except OSError:
                result = []
            if result:
                break
            time.sleep(0.5)
        assert result, f"Prometheus never had {query}; see {tmp_path / 'prometheus.log'}"
        assert float(result[0]["value"][1]) == 70
        assert result[0]["metric"]["job"] == "runnel"

        # The alerting rules load and evaluate against the real series without errors.
        deadline = time.monotonic() + 30
        while True:
            rules = [r for g in api(port, "rules")["groups"] for r in g["rules"]]
            if len(rules) == 9 and all(r.get("lastEvaluation", "").startswith("2") and
                                       not r["lastEvaluation"].startswith("0001") for r in rules):
                break
            assert time.monotonic() < deadline, rules
            time.sleep(0.5)
        assert {r["name"] for r in rules} == {
            "RunnelConsumerLagOverHalfRetention", "RunnelUnderReplicatedPartitions", "RunnelFrequentRebalances",
            "RunnelDiskAlmostFull", "RunnelUncleanLeaderElection", "RunnelOfflinePartitions",
            "RunnelActiveControllerCount", "RunnelFencedBrokers", "RunnelOfflineLogDir"}
        # One healthy node: exactly one active controller, nothing offline or fenced.
        quiet = {"RunnelOfflinePartitions", "RunnelActiveControllerCount", "RunnelFencedBrokers", "RunnelOfflineLogDir"}
        assert all(r["state"] == "inactive" for r in rules if r["name"] in quiet), rules
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
        # The lag (70 of 100 records held) is over half: the alert is pending (it waits 5 min).
        lag_alert = next(r for r in rules if r["name"] == "RunnelConsumerLagOverHalfRetention")
        deadline = time.monotonic() + 30
        while lag_alert["state"] == "inactive" and time.monotonic() < deadline:
            time.sleep(0.5)
            rules = [r for g in api(port, "rules")["groups"] for r in g["rules"]]
            lag_alert = next(r for r in rules if r["name"] == "RunnelConsumerLagOverHalfRetention")
        assert lag_alert["state"] == "pending", lag_alert

        # Every dashboard query uses metrics runnel serves and evaluates without error.
        served = {m for m in api(port, "label/__name__/values")}
        for expr in dashboard_queries():
            names = set(re.findall(r"\b([a-z_]+(?:_total|_bucket|_messages|_ratio|_bytes|_partitions|_connections))\b",
                                   expr))
            assert names, expr
            assert names <= served, (expr, names - served)
            api(port, "query", query=expr)
    finally:
        server.terminate()
        server.wait(20)
        log.close()
