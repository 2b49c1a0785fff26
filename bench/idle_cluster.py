"""Idle cluster: what three brokers spend keeping N replicated partitions in sync with no
traffic, KIP-227 fetch sessions on and off.

Per run: `runnel dev-cluster --nodes 3` on loopback, one topic of N partitions with
replication factor 3, one record to every partition (so every follower has fetched), a
settling pause, then the three brokers' CPU seconds (user + system, from /proc) over a
window with no client at all: only the followers' long-polling fetches (each follower
fetches from two leaders, naming every partition it follows there when sessions are off,
and nothing that has not changed when they are on). Every wait is bounded; the cluster
is stopped (SIGINT, then SIGKILL) at the end of each run.

  bench/idle_cluster.sh [--partitions 2000] [--seconds 30] [--runs 3]

Run through bench/idle_cluster.sh, which installs what this needs.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compat-tests"))
from ports import free_dev_cluster_base_port  # noqa: E402

CACHE = pathlib.Path(os.environ.get("RUNNEL_CACHE", pathlib.Path.home() / ".cache" / "runnel"))
TOPIC = "idle"


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid):
    return [int(c) for c in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def one_run(binary, partitions, seconds, sessions):
    work = CACHE / "bench" / "idle-cluster"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = free_dev_cluster_base_port()
    env = dict(os.environ)
    if not sessions:
        env["RUNNEL_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS"] = "0"
    log = open(work / "dev-cluster.log", "w")
    proc = subprocess.Popen([binary, "dev-cluster", "--nodes", "3", "--base-port", str(base),
                             "--data-root", str(work)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env)
    bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while True:
            try:
                if len(admin.list_topics(timeout=5).brokers) == 3:
                    break
            except Exception:  # noqa: BLE001  (not serving yet)
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not come up")
            time.sleep(0.2)
        admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=3)])[TOPIC].result(60)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(partitions):
            p.produce(TOPIC, value=b"x", partition=i)
            p.poll(0)
        assert p.flush(120) == 0, "records still unacknowledged"
        time.sleep(5)  # settle: every follower past its last record, ISRs full
        brokers = children(proc.pid)
        assert len(brokers) == 3, brokers
        before = sum(cpu_seconds(b) for b in brokers)
        time.sleep(seconds)
        return round(sum(cpu_seconds(b) for b in brokers) - before, 2)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            for b in children(proc.pid):
                os.kill(b, signal.SIGKILL)
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runnel", required=True)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    cpu = {"sessions": [], "no sessions": []}
    for run in range(args.runs):
        for variant in cpu:  # alternated, so drift in the machine hits both alike
            cpu[variant].append(one_run(args.runnel, args.partitions, args.seconds, variant == "sessions"))
            print(f"idle cluster run {run + 1}: {variant}: {cpu[variant][-1]} CPU s", file=sys.stderr, flush=True)
    rows = [f"| fetch sessions | CPU s of 3 brokers in {args.seconds:g} s idle: median | min | max | runs |",
            "|---|---|---|---|---|"]
    for variant, v in cpu.items():
        rows.append(f"| {variant} | {statistics.median(v)} | {min(v)} | {max(v)} | {', '.join(map(str, v))} |")
    table = "\n".join(rows)
    print(table)
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        (out / f"{stamp}-idle-cluster.json").write_text(json.dumps({"partitions": args.partitions, "seconds": args.seconds, "cpu_s": cpu}, indent=1) + "\n")
        (out / f"{stamp}-idle-cluster.md").write_text(
            f"# Idle 3-broker cluster, {args.partitions} partitions of replication factor 3\n\n{table}\n")


if __name__ == "__main__":
    main()
