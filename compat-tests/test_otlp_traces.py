"""Produce tracing over OTLP/HTTP: the real binary sends a span per produce request to
a collector, here a small HTTP server that decodes each export with OpenTelemetry's own
generated protobuf classes (opentelemetry-proto), so the wire format is checked by a
decoder runnel did not write. A librdkafka producer with acks=all and one with acks=1;
an absent collector costs spans (counted on /metrics), never a produce."""
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from conftest import RunnelProcess

TIMEOUT = 30.0


class Collector:
    """An OTLP/HTTP trace receiver on a free loopback port."""

    def __init__(self):
        self.requests = []  # (path, content type, ExportTraceServiceRequest)
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                decoded = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with collector.lock:
                    collector.requests.append((self.path, self.headers["Content-Type"], decoded))
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self):
        """[(resource attributes, span)] of everything received."""
        with self.lock:
            reqs = list(self.requests)
        out = []
        for _, _, req in reqs:
            for rs in req.resource_spans:
                attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    out.extend((attrs, s) for s in ss.spans)
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def attrs(span):
    out = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, kind)
    return out


def produce(bootstrap, topic, acks, n, client_id):
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "client.id": client_id, "linger.ms": 0})
    delivered = []
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        p.flush(TIMEOUT)  # one request per record
    assert p.flush(TIMEOUT) == 0
    assert delivered == [None] * n


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


def test_each_produce_is_a_span_and_acks_all_shows_the_replicas_wait(tmp_path, collector, topic_name):
    broker = RunnelProcess(tmp_path / "data",
                           extra_args=["--otlp-traces-endpoint", f"http://127.0.0.1:{collector.port}"])
    broker.start()
    try:
        produce(broker.bootstrap, topic_name, "all", 3, "traced-all")
        produce(broker.bootstrap, topic_name, "1", 2, "traced-one")

        def produce_spans():
            return [(r, s) for r, s in collector.spans() if s.name == "produce"
                    and attrs(s).get("messaging.client.id", "").startswith("traced-")]

        deadline = time.monotonic() + TIMEOUT
        while len(produce_spans()) < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        roots = produce_spans()
        by_acks = {}
        for _, s in roots:
            by_acks.setdefault(attrs(s)["runnel.acks"], []).append(s)
        # librdkafka may also produce nothing else here; exactly one span per request.
        assert sorted((k, len(v)) for k, v in by_acks.items()) == [("1", 2), ("all", 3)], by_acks.keys()

        with collector.lock:
            paths = {(path, ctype) for path, ctype, _ in collector.requests}
        assert paths == {("/v1/traces", "application/x-protobuf")}
        resource, _ = roots[0]
        assert resource["service.name"] == "runnel"
        assert resource["service.instance.id"] == "1", "the node id"

        children = {s.parent_span_id: s for _, s in collector.spans() if s.name == "produce.await_in_sync_replicas"}
        for acks, spans in by_acks.items():
            for s in spans:
                a = attrs(s)
                assert len(s.trace_id) == 16 and len(s.span_id) == 8 and s.parent_span_id == b""
                assert s.kind == trace_pb2.Span.SPAN_KIND_SERVER
                assert a["messaging.system"] == "kafka"
                assert a["messaging.destination.name"] == topic_name
                assert a["messaging.client.id"] == ("traced-all" if acks == "all" else "traced-one")
                assert a["runnel.partitions"] == 1
                assert "error.type" not in a and s.status.code == trace_pb2.Status.STATUS_CODE_UNSET
                assert 0 < s.start_time_unix_nano <= s.end_time_unix_nano
                assert abs(s.start_time_unix_nano / 1e9 - time.time()) < 300
                child = children.get(s.span_id)
                if acks == "all":
                    assert child is not None, "acks=all: a child span for the wait"
                    assert child.trace_id == s.trace_id
                    assert child.kind == trace_pb2.Span.SPAN_KIND_INTERNAL
                    assert s.start_time_unix_nano <= child.start_time_unix_nano <= child.end_time_unix_nano
                    assert child.end_time_unix_nano == s.end_time_unix_nano
                else:
                    assert child is None, "acks=1 has nothing to wait for after the append"
        assert len({s.trace_id for _, s in roots}) == 5, "a trace per request"
        text = urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=TIMEOUT).read().decode()
        exported = [line for line in text.splitlines() if line.startswith("otlp_spans_exported_total ")]
        assert exported and float(exported[0].split()[1]) >= 5, exported
    finally:
        broker.kill()


def test_an_absent_collector_costs_spans_not_produces(tmp_path, topic_name):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    broker = RunnelProcess(tmp_path / "data",
                           extra_args=["--otlp-traces-endpoint", f"http://127.0.0.1:{closed_port}"])
    broker.start()
    try:
        produce(broker.bootstrap, topic_name, "all", 5, "untraced")
        deadline = time.monotonic() + TIMEOUT
        dropped = 0.0
        while dropped < 5 and time.monotonic() < deadline:
            text = urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=TIMEOUT).read()
            for line in text.decode().splitlines():
                if line.startswith("otlp_spans_dropped_total "):
                    dropped = float(line.split()[1])
            time.sleep(0.2)
        assert dropped >= 5
        assert "OTLP span export failed" in broker.log_text()
    finally:
        broker.kill()


def test_an_https_endpoint_is_a_config_error(tmp_path):
    import subprocess
    from conftest import runnel_bin
    r = subprocess.run([runnel_bin(), "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                        "--otlp-traces-endpoint", "https://collector:4318"],
                       capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 2
    assert b"otlp_traces_endpoint" in r.stderr
