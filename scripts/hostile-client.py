#!/usr/bin/env python3
"""The adversarial pass of issue 43 against one runnel process, rerun: each attack that
turned a node off for good, with the numbers that show whether it still does. Bounded in
time, loopback only; needs root for the full-disk attack (a tmpfs), skipped otherwise.

    ~/.cache/runnel/venv/bin/python scripts/hostile-client.py [--partitions 5000]

1. unregister: UnregisterBroker v0 for the node itself (15 bytes); then produce, and
   produce again after a restart.
2. descriptors: at `ulimit -n 4096`, PARTITIONS partitions with one record each, read
   back by one consumer fetching them all in each request: records read, fetches,
   errors, the broker's peak descriptors; then a produce. And 2,000 stalled HTTP
   connections: the broker's descriptors, whether a produce is served. And at
   `ulimit -n 256`, 400 idle Kafka connections: whether a new client is served.
3. full disk: the data dir on a 16 MiB tmpfs, filled by produces until refused, then
   space freed: seconds until produce works again, records read back.
4. decompression: four concurrent produces of a 60 MiB gzip bomb (each a few KiB on
   the wire): RSS before, at the peak, and 10 s after.

Starts runnel itself ($RUNNEL_BIN, else target/release/runnel, else target/debug/runnel).
Not part of CI: its results go into the notes on the issue.
"""
import argparse
import gzip
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compat-tests"))
from differential import kwire  # noqa: E402


def binary():
    return os.environ.get("RUNNEL_BIN") or next(
        str(p) for p in (REPO / "target/release/runnel", REPO / "target/debug/runnel") if p.exists())


def status(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Runnel:
    def __init__(self, data, nofile=None, extra=()):
        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        log = open(os.path.join(os.path.dirname(data.rstrip("/")), "runnel.log"), "a")
        self.proc = subprocess.Popen(
            [binary(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--data-dir", data, *extra],
            stdout=subprocess.PIPE, stderr=log, text=True, preexec_fn=limit)
        line = self.proc.stdout.readline()
        assert "listening on" in line, line
        self.addr = line.strip().rsplit(" ", 1)[1]
        http = self.proc.stdout.readline()
        self.http = http.strip().rsplit(" ", 1)[1] if "http" in http else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def produce(addr, topic, partition, batch, acks=-1, timeout=30.0):
    with kwire.Conn(addr, timeout=timeout) as c:
        r = c.call("Produce", 9, acks=acks, timeout_ms=30000, transactional_id=None, topic_data=[
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}])
    return r["responses"][0]["partition_responses"][0]["error_code"]


def fetch(conn, topic, positions, max_bytes=1 << 20):
    """One Fetch of `topic` at {partition: offset}; the response's partitions."""
    r = conn.call("Fetch", 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                  topics=[{"topic": topic, "partitions": [
                      {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
                       "partition_max_bytes": max_bytes} for p, o in positions.items()]}])
    return r["responses"][0]["partitions"]


def connect_many(addr, n):
    """Up to `n` connections to `addr` that send nothing (fewer if the broker stops accepting)."""
    host, port = addr.rsplit(":", 1)
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection((host, int(port)), timeout=2))
        except OSError:
            break
    return socks


def create(addr, topic, partitions):
    r = kwire.call(addr, "CreateTopics", 5, timeout_ms=60000, validate_only=False, topics=[
        {"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}])
    return r["topics"][0]["error_code"]


def attack_unregister(tmp):
    node = Runnel(os.path.join(tmp, "unreg"))
    create(node.addr, "t", 1)
    # Request header v2 (flexible): key, version, correlation id, null client id, no tags;
    # then broker_id 1, no tags.
    body = struct.pack(">hhih", 64, 0, 1, -1) + b"\x00" + struct.pack(">i", 1) + b"\x00"
    with kwire.Conn(node.addr) as c:
        reply = c.send_raw(body)
    # Response header v1: correlation id, no tags; then throttle time, error code.
    error = struct.unpack(">h", reply[9:11])[0]
    after = produce(node.addr, "t", 0, kwire.record_batch([b"after"]))
    node.stop()
    node = Runnel(os.path.join(tmp, "unreg"))
    restarted = produce(node.addr, "t", 0, kwire.record_batch([b"restarted"]))
    node.stop()
    return [("UnregisterBroker(1) answered", error), ("produce after it", after), ("produce after a restart", restarted)]


def attack_descriptors(tmp, partitions):
    node = Runnel(os.path.join(tmp, "fds"), nofile=4096)
    pid = node.proc.pid
    assert create(node.addr, "wide", partitions) == 0
    with kwire.Conn(node.addr, timeout=120) as c:
        for start in range(0, partitions, 500):
            r = c.call("Produce", 9, acks=1, timeout_ms=30000, transactional_id=None, topic_data=[
                {"name": "wide", "partition_data": [{"index": p, "records": kwire.record_batch([b"x"])}
                                                    for p in range(start, min(partitions, start + 500))]}])
            assert all(p["error_code"] == 0 for p in r["responses"][0]["partition_responses"])
    offsets = {p: 0 for p in range(partitions)}
    fetches, errors, peak = 0, 0, fds(pid)
    deadline = time.time() + 300
    with kwire.Conn(node.addr, timeout=120) as c:
        while any(o < 1 for o in offsets.values()) and time.time() < deadline:
            fetches += 1
            answered = fetch(c, "wide", {p: o for p, o in offsets.items() if o < 1})
            peak = max(peak, fds(pid))
            for p in answered:
                errors += p["error_code"] != 0
                if p["records"]:
                    offsets[p["partition_index"]] += len(kwire.parse_batches(p["records"]))
    read = sum(1 for o in offsets.values() if o >= 1)
    after = produce(node.addr, "wide", 0, kwire.record_batch([b"after"]))
    rows = [(f"records read of {partitions}", read), ("fetches", fetches), ("partition errors", errors),
            ("peak descriptors (limit 4096)", peak), ("produce after", after)]
    # Stalled HTTP connections.
    stalled = connect_many(node.http, 2000)
    time.sleep(1)
    rows.append(("descriptors with 2,000 stalled HTTP connections", fds(pid)))
    rows.append(("produce with them held", produce(node.addr, "wide", 1, kwire.record_batch([b"held"]))))
    for s in stalled:
        s.close()
    node.stop()
    # At ulimit -n 256: 400 idle Kafka connections, then a new client.
    node = Runnel(os.path.join(tmp, "fds256"), nofile=256)
    idle = connect_many(node.addr, 400)
    time.sleep(1)
    try:
        served = kwire.call(node.addr, "Metadata", 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)["brokers"] != []
    except OSError as e:
        served = f"no: {e}"
    rows.append(("ulimit 256, 400 idle connections: descriptors", fds(node.proc.pid)))
    rows.append(("ulimit 256, 400 idle connections: a new client served", served))
    for s in idle:
        s.close()
    node.stop()
    return rows


def attack_full_disk(tmp):
    if os.geteuid() != 0:
        return [("skipped", "needs root for a tmpfs")]
    data = os.path.join(tmp, "full")
    os.makedirs(data)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", data], check=True)
    try:
        ballast = os.path.join(data, "ballast")
        with open(ballast, "wb") as f:
            f.write(b"\0" * (4 << 20))
        node = Runnel(data)
        create(node.addr, "fill", 1)
        acked, refused = 0, None
        for i in range(400):
            err = produce(node.addr, "fill", 0, kwire.record_batch([os.urandom(64 * 1024)]))
            if err:
                refused = err
                break
            acked += 1
        os.remove(ballast)
        t0, back = time.time(), None
        while time.time() - t0 < 60:
            if produce(node.addr, "fill", 0, kwire.record_batch([b"back"])) == 0:
                back = time.time() - t0
                break
            time.sleep(0.2)
        with kwire.Conn(node.addr) as c:
            got, offset = 0, 0
            while True:
                recs = fetch(c, "fill", {0: offset}, max_bytes=8 << 20)[0]["records"]
                n = len(kwire.parse_batches(recs)) if recs else 0
                if n == 0:
                    break
                got, offset = got + n, offset + n
        node.stop()
        return [("records acknowledged before the disk filled", acked), ("then refused with", refused),
                ("seconds from freeing space to a produce accepted", None if back is None else round(back, 1)),
                ("records read back (acknowledged + 1)", got)]
    finally:
        subprocess.run(["umount", data])


def attack_bombs(tmp):
    node = Runnel(os.path.join(tmp, "bombs"))
    pid = node.proc.pid
    create(node.addr, "bombs", 1)
    record = kwire.encode_record(b"\0" * (60 << 20), 0)
    bomb = kwire.raw_batch(gzip.compress(record, 9), 1, codec="gzip")
    before = status(pid, "VmRSS:")
    results = []
    threads = [threading.Thread(target=lambda: results.append(produce(node.addr, "bombs", 0, bomb, timeout=120)))
               for _ in range(4)]
    for t in threads:
        t.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, status(pid, "VmRSS:"))
        time.sleep(0.05)
    time.sleep(10)
    after = status(pid, "VmRSS:")
    node.stop()
    return [("bomb size on the wire (bytes)", len(bomb)), ("produce errors", results),
            ("RSS before / peak / 10 s after (MB)", f"{before // 1024} / {peak // 1024} / {after // 1024}")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in [("1 unregister", lambda: attack_unregister(tmp)),
                          ("2 descriptors", lambda: attack_descriptors(tmp, args.partitions)),
                          ("3 full disk", lambda: attack_full_disk(tmp)),
                          ("4 decompression", lambda: attack_bombs(tmp))]:
            started = time.time()
            for what, value in run():
                print(f"{name:16} {what:52} {value}")
            print(f"{name:16} {'(seconds)':52} {time.time() - started:.0f}", flush=True)


if __name__ == "__main__":
    main()
