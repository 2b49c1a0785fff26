"""HTTP produce throughput against Kafka-protocol produce, on one runnel broker.

    bench/http_produce.sh [--seconds 10] [--connections 1,4] [--record-size 1024]

Both sides send the same work the same way: requests of 100 records of `--record-size`
bytes (ASCII values, no key), acks=1, one partition, each connection with one request in
flight, the request body built once and sent again and again (so the Python client costs
the same on both sides and little). The Kafka side is a raw Produce v3 (one uncompressed
v2 batch of 100 records, `kwire.py`); the HTTP side is `POST /topics/{t}/messages` with a
JSON array of 100 `{"value": ...}` on a keep-alive connection. Prints records/s and
MiB/s (record values) per side and the HTTP/Kafka ratio, plus where the CPU went
(broker, this client, others), because a busy machine makes the numbers noisy.
"""
import argparse
import http.client
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import crc32c

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kwire  # noqa: E402

BATCH = 100
REPO = Path(__file__).resolve().parent.parent


def kafka_batch(value: bytes, n: int) -> bytes:
    """One v2 batch of n records without key or headers."""
    ts = int(time.time() * 1000)
    records = b""
    for i in range(n):
        body = b"\x00" + kwire._varint(0) + kwire._varint(i) + kwire._varint(-1) \
            + kwire._varint(len(value)) + value + kwire._varint(0)
        records += kwire._varint(len(body)) + body
    tail = struct.pack(">hiqqqhii", 0, n - 1, ts, ts, -1, -1, -1, n) + records
    after_length = struct.pack(">ibI", -1, 2, crc32c.crc32c(tail)) + tail
    return struct.pack(">qi", 0, len(after_length)) + after_length


def start_broker(binary: str, data: str):
    # Retention runs every second so that the topics (capped below) stay small on disk.
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                             "--log-retention-check-interval-ms", "1000", "--data-dir", data],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    kafka = http_port = None
    deadline = time.time() + 20
    while (kafka is None or http_port is None) and time.time() < deadline:
        line = proc.stdout.readline().decode()
        m = re.search(r"listening on (\S+):(\d+)", line)
        kafka = int(m.group(2)) if m else kafka
        m = re.search(r"runnel http: serving on (\S+):(\d+)", line)
        http_port = int(m.group(2)) if m else http_port
    if kafka is None or http_port is None:
        proc.kill()
        raise RuntimeError("runnel did not start")
    return proc, kafka, http_port


def cpu_ticks(pid=None):
    """(process ticks, machine busy ticks)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]
    if pid is None:
        return 0, busy
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return int(st[11]) + int(st[12]), busy


def percentile(sorted_values, q):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    k = math.ceil(q / 100 * len(sorted_values)) - 1
    return sorted_values[max(0, min(len(sorted_values) - 1, k))]


def run(send_one, connections: int, seconds: float, broker_pid: int, latencies=None, requests=None):
    """Runs `send_one(conn_index)` in a loop on each connection for `seconds`, or until
    the connections have sent `requests` between them; returns requests/s and the CPU
    split in cores (broker, client, other). With `latencies` (a list), every request's
    seconds from send to response are appended to it."""
    done = [0] * connections
    quota = None if requests is None else max(1, requests // connections)
    stop = time.time() + seconds
    errors = []
    per_conn = [[] for _ in range(connections)]

    def loop(i):
        mine = per_conn[i]
        try:
            while time.time() < stop and (quota is None or done[i] < quota):
                t = time.perf_counter()
                send_one(i)
                mine.append(time.perf_counter() - t)
                done[i] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    b0, m0 = cpu_ticks(broker_pid)
    c0 = os.times()
    t0 = time.time()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    c1 = os.times()
    b1, m1 = cpu_ticks(broker_pid)
    if errors:
        raise errors[0]
    if latencies is not None:
        for mine in per_conn:
            latencies.extend(mine)
    hz = os.sysconf("SC_CLK_TCK")
    broker = (b1 - b0) / hz / elapsed
    client = (c1.user + c1.system - c0.user - c0.system) / elapsed
    machine = (m1 - m0) / hz / elapsed
    return sum(done) / elapsed, (broker, client, max(0.0, machine - broker - client))


def ascii_value(size: int) -> bytes:
    return (b"abcdefghijklmnopqrstuvwxyz" * (size // 26 + 1))[:size]


def http_body(value: bytes) -> bytes:
    """The HTTP side's request: a JSON array of BATCH records, value only."""
    return json.dumps([{"value": value.decode()} for _ in range(BATCH)]).encode()


def measure(side: str, host: str, port: int, topic: str, value: bytes, connections: int,
            seconds: float, broker_pid: int, requests=None) -> dict:
    """One row: `side` "kafka" (raw Produce v3 of one BATCH-record batch, acks=1) or "http"
    (POST /topics/{topic}/messages?acks=1 of BATCH records) on `connections` connections,
    each with one request in flight, for `seconds` (or until `requests` were sent, if
    that comes first). Returns records/s, MiB/s (values),
    per-request p50/p99 ms, the CPU split in cores and the records sent."""
    if side == "kafka":
        batch = kafka_batch(value, BATCH)
        conns = [kwire.Conn(host, port) for _ in range(connections)]

        def send(i):
            err = kwire._produce(conns[i], topic.encode(), batch)
            if err:
                raise RuntimeError(f"Kafka error {err}")
    else:
        body = http_body(value)
        conns = [http.client.HTTPConnection(host, port) for _ in range(connections)]

        def send(i):
            conns[i].request("POST", f"/topics/{topic}/messages?acks=1", body,
                             {"Content-Type": "application/json"})
            r = conns[i].getresponse()
            answer = r.read()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {answer[:300]!r}")
    lat = []
    try:
        rate, (broker, client, other) = run(send, connections, seconds, broker_pid, lat, requests)
    finally:
        for c in conns:
            c.close()
    lat.sort()
    recs = rate * BATCH
    return {"records/s": recs, "MiB/s": recs * len(value) / 2**20,
            "request p50 ms": percentile(lat, 50) * 1000, "request p99 ms": percentile(lat, 99) * 1000,
            "broker cores": broker, "client cores": client, "other cores": other,
            "records": len(lat) * BATCH}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--connections", default="1,4")
    ap.add_argument("--record-size", type=int, default=1024)
    args = ap.parse_args()
    binary = os.environ.get("RUNNEL_BIN", str(REPO / "target" / "release" / "runnel"))
    value = ascii_value(args.record_size)
    with tempfile.TemporaryDirectory() as data:
        proc, kafka_port, http_port = start_broker(binary, data)
        try:
            c = http.client.HTTPConnection("127.0.0.1", http_port)
            for t in ("bench-http", "bench-kafka"):
                # At most ~320 MiB each on disk, however long the run.
                configs = {"retention.bytes": str(256 << 20), "segment.bytes": str(64 << 20)}
                c.request("POST", "/topics", json.dumps({"name": t, "partitions": 1, "configs": configs}).encode())
                r = c.getresponse()
                r.read()
                assert r.status == 201, r.status
            c.close()
            print(f"runnel {binary}; {BATCH} records of {args.record_size} B per request, acks=1, "
                  f"{args.seconds:.0f} s per row, {os.cpu_count()} cores")
            print(f"{'connections':>11} {'side':>6} {'records/s':>11} {'MiB/s':>8} "
                  f"{'broker cores':>12} {'client cores':>12} {'other cores':>11} {'p50 ms':>7} {'p99 ms':>7}")
            for n in [int(x) for x in args.connections.split(",")]:
                rates = {}
                for side, port, topic in (("kafka", kafka_port, "bench-kafka"), ("http", http_port, "bench-http")):
                    r = measure(side, "127.0.0.1", port, topic, value, n, args.seconds, proc.pid)
                    rates[side] = r["records/s"]
                    print(f"{n:>11} {side:>6} {r['records/s']:>11.0f} {r['MiB/s']:>8.1f} "
                          f"{r['broker cores']:>12.2f} {r['client cores']:>12.2f} {r['other cores']:>11.2f} "
                          f"{r['request p50 ms']:>7.2f} {r['request p99 ms']:>7.2f}")
                print(f"{n:>11} {'http/kafka':>6} {rates['http'] / rates['kafka']:>11.2f}")
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
