#!/usr/bin/env python3
"""Connection abuse against one runnel process, bounded in time, loopback only.

    ~/.cache/runnel/venv/bin/python scripts/connection-abuse.py [--idle 5000] [--half 1000]

1. Holds IDLE idle connections and HALF connections that sent 5 bytes of a 100-byte
   frame, then has confluent-kafka (librdkafka) produce and consume 2000 records and times
   200 Metadata requests on a fresh raw connection: errors, p50/p99.
2. Closes them; then 8 connections each send 96 MiB of a 100 MiB frame (as fast as the
   broker reads them) while RSS is sampled; then they close and RSS is read again.

Prints one table. Starts runnel itself ($RUNNEL_BIN, else target/release/runnel, else
target/debug/runnel) with --max-connections above the number held. Not part of CI: its
results go into the notes on the issue.
"""
import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compat-tests"))
from differential import kwire  # noqa: E402


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def start_runnel(data, extra):
    binary = os.environ.get("RUNNEL_BIN") or next(
        (str(p) for p in (REPO / "target/release/runnel", REPO / "target/debug/runnel") if p.exists()), None)
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--data-dir", data, *extra],
                            stdout=subprocess.PIPE, stderr=open(os.path.join(os.path.dirname(data), "runnel.log"), "w"), text=True)
    line = proc.stdout.readline()
    assert "listening on" in line, line
    return proc, line.strip().rsplit(" ", 1)[1]


def open_many(addr, n, payload):
    host, port = addr.rsplit(":", 1)
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=10)
        if payload:
            s.sendall(payload)
        socks.append(s)
    return socks


def metadata_latencies(addr, n=200):
    out = []
    with kwire.Conn(addr) as c:
        for _ in range(n):
            t = time.perf_counter()
            c.call("Metadata", 12, topics=None, allow_auto_topic_creation=False)
            out.append((time.perf_counter() - t) * 1000)
    return out


def client_round(addr, topic, n=2000):
    from confluent_kafka import Consumer, Producer, TopicPartition
    errors = []
    p = Producer({"bootstrap.servers": addr, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda e, m: e and errors.append(e))
        p.poll(0)
    p.flush(30)
    c = Consumer({"bootstrap.servers": addr, "group.id": "abuse", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = 0, time.time() + 30
    while got < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error())
        else:
            got += 1
    c.close()
    return got, errors


def partial_frames(addr, pid, n=8, declared=100 << 20, send=96 << 20, seconds=20):
    host, port = addr.rsplit(":", 1)
    stop = threading.Event()
    socks = []

    def pump(s):
        s.settimeout(0.5)
        chunk = b"\x00" * (1 << 20)
        sent = 0
        try:
            s.sendall(declared.to_bytes(4, "big"))
            while sent < send and not stop.is_set():
                try:
                    sent += s.send(chunk[: min(len(chunk), send - sent)])
                except socket.timeout:
                    continue
        except OSError:
            pass

    threads = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=10)
        socks.append(s)
        t = threading.Thread(target=pump, args=(s,), daemon=True)
        t.start()
        threads.append(t)
    peak = 0.0
    end = time.time() + seconds
    while time.time() < end:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.2)
    during = rss_mb(pid)
    stop.set()
    for s in socks:
        s.close()
    for t in threads:
        t.join(5)
    time.sleep(3)
    return peak, during, rss_mb(pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--half", type=int, default=1000)
    ap.add_argument("--runnel-arg", action="append", default=[])
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp(prefix="abuse-")
    held = a.idle + a.half
    proc, addr = start_runnel(os.path.join(tmp, "data"),
                              ["--max-connections", str(held + 100), *a.runnel_arg])
    rows = []
    try:
        time.sleep(0.5)
        rows.append(("RSS idle broker (MB)", f"{rss_mb(proc.pid):.1f}"))
        base_lat = metadata_latencies(addr)
        idle = open_many(addr, a.idle, b"")
        half = open_many(addr, a.half, (100).to_bytes(4, "big") + b"\x00")
        time.sleep(1)
        rows.append((f"descriptors with {a.idle} idle + {a.half} half-frame", str(fds(proc.pid))))
        rows.append(("RSS while held (MB)", f"{rss_mb(proc.pid):.1f}"))
        t = time.time()
        got, errors = client_round(addr, "abuse")
        rows.append(("librdkafka produce+consume 2000 (s)", f"{time.time() - t:.2f}"))
        rows.append(("records consumed / client errors", f"{got} / {len(errors)}"))
        lat = metadata_latencies(addr)
        q = statistics.quantiles
        rows.append(("Metadata ms p50 / p99, nothing held", f"{statistics.median(base_lat):.2f} / {q(base_lat, n=100)[98]:.2f}"))
        rows.append(("Metadata ms p50 / p99, all held", f"{statistics.median(lat):.2f} / {q(lat, n=100)[98]:.2f}"))
        for s in idle + half:
            s.close()
        time.sleep(1)
        rows.append(("RSS after closing them (MB)", f"{rss_mb(proc.pid):.1f}"))
        peak, during, after = partial_frames(addr, proc.pid)
        rows.append(("8 x 96 MiB partial frames: RSS peak / at end (MB)", f"{peak:.1f} / {during:.1f}"))
        rows.append(("RSS 3 s after they closed (MB)", f"{after:.1f}"))
    finally:
        proc.terminate()
        proc.wait(30)
    width = max(len(r[0]) for r in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
