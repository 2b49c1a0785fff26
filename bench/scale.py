"""Scale run: many partitions on one broker, runnel and Apache Kafka 4.4 side by side.

Per broker: create one topic with N partitions (time until every partition has a
leader), RSS and descriptors held (/proc/PID/fd), one record produced to every partition
(confluent-kafka, acks=all), a Java consumer of every partition (kafka-console-consumer)
that reads them and then long-polls for IDLE_S seconds (the broker's CPU seconds over its
run: with KIP-227 fetch sessions its idle fetches name nothing and are answered with
nothing), SIGTERM time, restart time (until metadata lists every
partition with a leader again), descriptors after the restart, a second SIGTERM.
The broker runs with this shell's `ulimit -n`, which the script leaves alone. Every wait
is bounded; a broker still running at the end is killed.

Run through bench/scale.sh, which installs what this needs.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compat-tests"))
import kafka_tools  # noqa: E402  (the Kafka jars' classpath and tool command lines)

CACHE = pathlib.Path(os.environ.get("RUNNEL_CACHE", pathlib.Path.home() / ".cache" / "runnel"))
# Kafka's controller refuses one operation of more than 10,000 records
# (POLICY_VIOLATION, "excessively large batch operation"), so the partitions are spread
# over topics of 1,000 each, created one request at a time, on both brokers.
PER_TOPIC = 1000
# How long the consumer long-polls after its last record.
IDLE_S = 30


def topics_for(n):
    return {f"scale-{i}": min(PER_TOPIC, n - i * PER_TOPIC) for i in range((n + PER_TOPIC - 1) // PER_TOPIC)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def soft_nofile(pid):
    for line in pathlib.Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return None


def wait_partitions(bootstrap, n, deadline):
    """Until metadata shows the topics of `n` partitions, each partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    want = topics_for(n)
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=10).topics
            if all(t in md and md[t].error is None and len(md[t].partitions) == k
                   and all(p.leader >= 0 for p in md[t].partitions.values()) for t, k in want.items()):
                return
        except Exception:  # not serving yet
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{bootstrap}: the {n} partitions did not all show a leader in time")


def cpu_seconds(pid):
    """User plus system CPU seconds of `pid` so far."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_consumer(bootstrap, pid, deadline):
    """A Java consumer group of every partition reads the records, then long-polls for
    IDLE_S seconds; returns (the broker's CPU seconds over the consumer's run, records read)."""
    cmd = kafka_tools.tool_command(kafka_tools.CONSOLE_CONSUMER, "--bootstrap-server", bootstrap,
                                   "--include", "scale-.*", "--from-beginning", "--timeout-ms", IDLE_S * 1000,
                                   "--group", f"scale-{time.time_ns()}")
    cpu0 = cpu_seconds(pid)
    p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=max(60.0, deadline - time.monotonic()))
    return round(cpu_seconds(pid) - cpu0, 2), len(p.stdout.splitlines())


def wait_exit(pid, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return round(time.monotonic() - t0, 2)
        # Reap our own child so that it does not linger as a zombie.
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return round(time.monotonic() - t0, 2)
        except ChildProcessError:
            pass
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    return None


def sigterm_seconds(pid, timeout):
    os.kill(pid, signal.SIGTERM)
    return wait_exit(pid, timeout)


def produce_all(bootstrap, n, deadline):
    """One record to every partition; returns (seconds, delivery errors)."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.messages": n + 1000})
    t0 = time.monotonic()
    for topic, k in topics_for(n).items():
        for i in range(k):
            p.produce(topic, value=b"x" * 100, partition=i,
                      on_delivery=lambda err, msg: err and errors.append(str(err)))
            p.poll(0)
    remaining = p.flush(max(1.0, deadline - time.monotonic()))
    return round(time.monotonic() - t0, 2), len(errors) + remaining, errors[:3]


class Runnel:
    def __init__(self, binary, work, name="runnel", args=()):
        self.name = name
        self.binary = binary
        self.args = list(args)
        self.data = work / "runnel-data"
        shutil.rmtree(self.data, ignore_errors=True)
        self.port = free_port()
        self.proc = None

    def launch(self):
        self.log = open(self.data.parent / "runnel.log", "a")
        self.proc = subprocess.Popen([self.binary, "--listen", f"127.0.0.1:{self.port}",
                                      "--http-listen", "127.0.0.1:0", "--data-dir", str(self.data)] + self.args,
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self.proc.pid

    relaunch = launch

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Kafka:
    name = "kafka"
    script = REPO / "compat-tests" / "reference-kafka.sh"

    def __init__(self, work):
        self.port = free_port()
        self.dir = CACHE / "ref-kafka" / str(self.port)
        self.pid = None

    def launch(self):
        """First start: the script formats a fresh log dir and starts the broker."""
        subprocess.run(["bash", str(self.script), "start", str(self.port)], check=True,
                       capture_output=True, timeout=180)
        self.pid = int((self.dir / "pid").read_text().strip())
        # Kept for the restart, which reuses the log dir (the script always formats anew).
        self.cmd = [a.decode() for a in pathlib.Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")[:-1]]
        return self.pid

    def relaunch(self):
        out = open(self.dir / "stdout-restart.log", "w")
        proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = proc.pid
        (self.dir / "pid").write_text(f"{proc.pid}\n")
        return proc.pid

    def kill(self):
        subprocess.run(["bash", str(self.script), "stop", str(self.port)], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def run(broker, n, budget_s):
    deadline = time.monotonic() + budget_s
    r = {"broker": broker.name, "partitions": n}
    bootstrap = f"127.0.0.1:{broker.port}"
    try:
        pid = broker.launch()
        r["soft_nofile"] = soft_nofile(pid)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        t0 = time.monotonic()
        while True:  # until it serves
            try:
                admin.list_topics(timeout=5)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        r["idle_fds"], r["idle_rss_mb"] = fds(pid), rss_mb(pid)
        t0 = time.monotonic()
        # One request per topic: Kafka counts a request's records together against the limit.
        for t, k in topics_for(n).items():
            fut = admin.create_topics([NewTopic(t, num_partitions=k, replication_factor=1)],
                                      request_timeout=max(30.0, budget_s / 2))[t]
            fut.result(timeout=max(30.0, deadline - time.monotonic()))
        wait_partitions(bootstrap, n, deadline)
        r["create_s"] = round(time.monotonic() - t0, 2)
        r["created_fds"], r["created_rss_mb"] = fds(pid), rss_mb(pid)
        r["produce_s"], r["produce_errors"], r["produce_error_samples"] = produce_all(bootstrap, n, deadline)
        r["produced_fds"], r["produced_rss_mb"] = fds(pid), rss_mb(pid)
        r["consumer_cpu_s"], r["consumer_records"] = idle_consumer(bootstrap, pid, deadline)
        r["sigterm_s"] = sigterm_seconds(pid, 120)
        t0 = time.monotonic()
        pid = broker.relaunch()
        wait_partitions(bootstrap, n, deadline)
        r["restart_s"] = round(time.monotonic() - t0, 2)
        r["restarted_fds"], r["restarted_rss_mb"] = fds(pid), rss_mb(pid)
        r["sigterm_clean_s"] = sigterm_seconds(pid, 120)
    except Exception as e:  # report what was measured, then the failure
        r["error"] = f"{type(e).__name__}: {e}"
    finally:
        broker.kill()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runnel", required=True)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--only", default="runnel,kafka",
                    help="of runnel, kafka, and runnel-no-sessions (runnel without fetch sessions)")
    ap.add_argument("--budget", type=float, default=600, help="seconds per broker")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    work = CACHE / "bench" / "scale"
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.only.split(","):
        if name == "runnel":
            broker = Runnel(args.runnel, work)
        elif name == "runnel-no-sessions":
            broker = Runnel(args.runnel, work, name, ["--max-incremental-fetch-session-cache-slots", "0"])
        else:
            broker = Kafka(work)
        print(f"scale: {name} with {args.partitions} partitions ...", file=sys.stderr, flush=True)
        results.append(run(broker, args.partitions, args.budget))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    keys = ["soft_nofile", "idle_fds", "create_s", "created_fds", "created_rss_mb", "produce_s",
            "produce_errors", "produced_fds", "produced_rss_mb", "consumer_cpu_s", "consumer_records", "sigterm_s", "restart_s",
            "restarted_fds", "restarted_rss_mb", "sigterm_clean_s", "error"]
    lines = [f"| {'':18} | " + " | ".join(r["broker"] for r in results) + " |",
             "|---" * (len(results) + 1) + "|"]
    for k in keys:
        if any(k in r for r in results):
            lines.append(f"| {k:18} | " + " | ".join(str(r.get(k, "")) for r in results) + " |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        (out / f"{stamp}-scale.json").write_text(json.dumps(results, indent=1) + "\n")
        (out / f"{stamp}-scale.md").write_text(
            f"# Scale run, {args.partitions} partitions, one broker\n\n{table}\n")


if __name__ == "__main__":
    main()
