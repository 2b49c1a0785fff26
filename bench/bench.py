"""Side-by-side benchmark of runnel against Apache Kafka 4.4 (run through bench/run.sh).

Rounds alternate between the brokers (runnel, Kafka, runnel, Kafka, ...). Every round
starts its broker on a fresh data dir and runs, with identical client settings:

  start-up   wall time from process start until one produce (acks=1) is acknowledged,
             VmRSS after an idle pause, VmHWM (peak RSS) at the end of the round
  produce    Kafka's ProducerPerformance: 1 KiB records; acks=1 (idempotence off: the
             Java client refuses idempotence without acks=all) and acks=all with
             idempotence; 1 and 8 partitions; batch.size/linger.ms at the client defaults
             (16384 / 5) and at a throughput setting (262144 / 10)
  consume    Kafka's ConsumerPerformance over the acks=1 throughput-setting topics (it
             always joins a consumer group: n/a while a broker serves no groups)
  latency    ProducerPerformance at a fixed 20000 records/s, acks=all, idempotent
  rdkafka    librdkafka's rdkafka_performance: produce (acks=all, idempotent) into 1 and 8
             partitions, then consume those partitions without a group
  codecs     ProducerPerformance, acks=1, 1 partition, throughput batching, with text-like
             1 KiB records (a --payload-file of JSON log events, see payloads.py) sent
             uncompressed and with compression.type gzip, snappy, lz4 and zstd
  http       requests of 100 1 KiB records, acks=1, 1 partition, one request in flight per
             connection (1 and 4), 15,000 requests (1.4 GiB) per row after a sync, from one
             Python client (http_produce.py):
             as Kafka Produce v3 on both brokers, and as POST /topics/{t}/messages on
             runnel (Kafka has none); records/s and per-request p50/p99

`--only GROUP[,GROUP...]` runs a subset (groups: produce, consume, latency, rdkafka, codecs, http);
start-up and memory are measured in every round regardless.

`--baseline BINARY` puts another runnel binary in Kafka's place: the same figures, rounds
alternating, the ratio new/baseline. That is how a change's cost on the Kafka path is
measured (an A/B of the commit before it and the commit itself); the JSON keeps the second
side under "kafka" and names the binary in meta.baseline.

Figures are medians over rounds with min-max; the ratio is runnel/Kafka of the medians,
with the min-max of the per-round ratios. Results go to <out>/<stamp>-<mode>.{json,md,png}.
Benchmarks report numbers and never fail on one; the exit code is 1 only when a
measurement could not be taken at all (a tool failed or timed out).
"""
import argparse
import datetime
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "compat-tests"))
sys.path.insert(0, str(HERE))

import http_produce  # noqa: E402
import kafka_tools  # noqa: E402  (compat-tests/kafka_tools.py)
import kwire  # noqa: E402
import payloads  # noqa: E402

CACHE = Path(os.environ.get("RUNNEL_CACHE", Path.home() / ".cache" / "runnel"))
RECORD_SIZE = 1024
HZ = os.sysconf("SC_CLK_TCK")

# Sizes. FULL takes ~13 min on a quiet 2-core machine (3 rounds each; the codec figures
# ~4 min of it, gzip's client-bound row the longest), well under 30 loaded.
PROFILES = {
    "full": dict(rounds=3, produce_default=400_000, produce_throughput=1_000_000,
                 latency=440_000, rdkafka=1_000_000, codec=500_000, payload_lines=20_000,
                 idle_settle=3.0, tool_timeout=300, http_requests=15_000),
    "smoke": dict(rounds=1, produce_default=10_000, produce_throughput=20_000,
                  latency=30_000, rdkafka=20_000, codec=5_000, payload_lines=2_000,
                  idle_settle=1.0, tool_timeout=120, http_requests=300),
}
# Figure groups for --only (start-up and memory are measured in every round regardless).
GROUPS = ("produce", "consume", "latency", "rdkafka", "codecs", "http")
# The codec figures: compression.type values, "none" being the same text payload uncompressed.
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
WORK = HERE / ".work"  # generated inputs (the codec figures' payload file); git-ignored
BATCHING = {
    "default": ["batch.size=16384", "linger.ms=5"],
    "throughput": ["batch.size=262144", "linger.ms=10"],
}
ACKS = {
    "1": ["acks=1", "enable.idempotence=false"],
    "all": ["acks=all", "enable.idempotence=true"],
}
FIXED_RATE = 20_000


class Unsupported(Exception):
    """The broker does not serve what the figure needs (reported as n/a, not an error)."""


# --------------------------------------------------------------------------- helpers

def log(msg: str):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ephemeral_ports() -> tuple:
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port_pair() -> int:
    """A port p with p and p+1 free on 127.0.0.1 (Kafka's controller takes p+1).

    Taken below the kernel's ephemeral range when there is room: a port from that range can
    be free when checked and yet be taken, before the broker binds it, by some client's
    outgoing connection or a port-0 listener (on a shared machine running connection-heavy
    tests, Kafka's start then failed with "Address already in use")."""
    lo, _ = ephemeral_ports()
    below = (20000, lo - 2) if lo - 2 - 20000 >= 1000 else None
    for attempt in range(200):
        if below and attempt < 150:
            p = random.randint(*below)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                p = s.getsockname()[1]
        if p > 65000:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def proc_status(pid: int) -> dict:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0  # MiB
    except OSError:
        pass
    return out


def proc_cpu_seconds(pid: int) -> float:
    return sum(proc_cpu_split(pid))


def proc_cpu_split(pid: int) -> tuple:
    """(user, system) CPU seconds of `pid` so far; (0, 0) once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / HZ, int(fields[12]) / HZ
    except (OSError, IndexError):
        return 0.0, 0.0


def proc_start_boottime(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / HZ


def machine_busy_seconds() -> float:
    """CPU seconds spent non-idle by the whole machine since boot."""
    v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / HZ


def children_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class LoadMeter:
    """CPU used on the machine during a step, split into the broker, our clients (waited-for
    children) and everything else (other users of the machine): 'foreign' cores."""

    def __init__(self, broker_pid_fn):
        self.broker_pid_fn = broker_pid_fn

    def __enter__(self):
        self.t = time.monotonic()
        self.busy = machine_busy_seconds()
        self.kids = children_cpu_seconds()
        self.broker = proc_cpu_seconds(self.broker_pid_fn())
        self.loadavg = os.getloadavg()[0]
        return self

    def __exit__(self, *exc):
        dt = max(time.monotonic() - self.t, 1e-6)
        busy = machine_busy_seconds() - self.busy
        kids = children_cpu_seconds() - self.kids
        broker = proc_cpu_seconds(self.broker_pid_fn()) - self.broker
        self.broker_cpu_s = broker
        self.result = dict(seconds=round(dt, 2),
                           broker_cores=round(broker / dt, 2),
                           client_cores=round(kids / dt, 2),
                           foreign_cores=round(max(busy - broker - kids, 0.0) / dt, 2),
                           loadavg1=round(self.loadavg, 2))
        return False


def run(cmd, timeout, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"timed out after {timeout}s: {' '.join(map(str, cmd[-12:]))}\n"
                           f"{(e.stdout or '')[-2000:] if isinstance(e.stdout, str) else ''}")


def tail(text: str, n: int = 15) -> str:
    return "\n".join((text or "").strip().splitlines()[-n:])


# --------------------------------------------------------------------------- brokers

class Runnel:
    """side: "runnel", or "kafka" for a --baseline runnel in Kafka's column."""

    def __init__(self, binary: str, workdir: Path, side: str = "runnel"):
        self.binary = binary
        self.workdir = workdir
        self.proc = None
        self.name = side
        self.label = "baseline" if side == "kafka" else "runnel"
        # A --baseline build may predate the HTTP listener (and its flag).
        help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
        self.has_http = "--http-listen" in help_text

    def start(self, deadline_s: float):
        self.port = free_port_pair()
        self.http_port = self.port + 1 if self.has_http else None
        self.data = Path(tempfile.mkdtemp(prefix="runnel-", dir=self.workdir))
        self.logf = open(self.data.parent / f"{self.data.name}.log", "w")
        t0 = kwire.now()
        self.proc = subprocess.Popen(
            [self.binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data)]
            + (["--http-listen", f"127.0.0.1:{self.http_port}"] if self.has_http else []),
            stdout=self.logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        acked = kwire.first_ack(
            "127.0.0.1", self.port, "startup-probe", t0 + deadline_s,
            gave_up=lambda: self.proc.poll() is not None
            and f"runnel exited with code {self.proc.returncode} (log: {self.logf.name})")
        return acked - t0

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "logf", None):
            self.logf.close()
        shutil.rmtree(self.data, ignore_errors=True)


class Kafka:
    """Apache Kafka 4.4 through compat-tests/reference-kafka.sh (fresh log dir per start)."""
    name = "kafka"
    label = "kafka"
    http_port = None  # Kafka has no HTTP API
    script = REPO / "compat-tests" / "reference-kafka.sh"

    def __init__(self):
        self.pid = None

    def start(self, deadline_s: float):
        self.port = free_port_pair()
        self.dir = CACHE / "ref-kafka" / str(self.port)
        pidfile = self.dir / "pid"
        shutil.rmtree(self.dir, ignore_errors=True)
        t_script = kwire.now()
        script = subprocess.Popen(["bash", str(self.script), "start", str(self.port)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL)
        result = {}
        # The script formats the log dir (its own JVM) and then launches kafka.Kafka; time
        # starts when that broker process starts (/proc/PID/stat), as runnel's does.
        waiter = threading.Thread(target=lambda: result.update(out=script.communicate()))
        waiter.start()
        deadline = t_script + deadline_s
        while not pidfile.exists():
            if script.poll() is not None and not pidfile.exists():
                waiter.join()
                raise RuntimeError("reference-kafka.sh start failed:\n" + tail(result["out"][1]))
            if kwire.now() > deadline:
                raise RuntimeError("reference Kafka wrote no pid file")
            time.sleep(0.005)
        while not pidfile.read_text().strip():  # written by `echo $! > pid`
            time.sleep(0.002)
        self.pid = int(pidfile.read_text().strip())
        t0 = proc_start_boottime(self.pid)
        self.format_seconds = round(t0 - t_script, 2)
        try:
            acked = kwire.first_ack(
                "127.0.0.1", self.port, "startup-probe", deadline,
                gave_up=lambda: script.poll() not in (None, 0) and "reference-kafka.sh start failed")
        except RuntimeError as e:
            if script.poll() not in (None, 0):
                waiter.join()
                raise RuntimeError(f"{e}\n{tail(result['out'][1])}") from None
            raise
        waiter.join()
        if script.returncode != 0:
            raise RuntimeError("reference-kafka.sh start failed:\n" + tail(result["out"][1]))
        return acked - t0

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        subprocess.run(["bash", str(self.script), "stop", str(self.port)],
                       capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.pid = None


# --------------------------------------------------------------------------- clients

def create_topic(bootstrap: str, topic: str, partitions: int):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                        replication_factor=1)])[topic]
    fut.result(timeout=60)
    # Wait until every partition has a leader (Kafka elects them asynchronously).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} has no leaders after 60 s")


PP_LINE = re.compile(
    r"(\d+) (steady state )?records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
    r"([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, "
    r"(\d+) ms 99th, (\d+) ms 99.9th")


# With --print-metrics: the producer's mean compressed/uncompressed size of its batches.
PP_COMPRESSION = re.compile(
    r"^producer-metrics:compression-rate-avg:\{[^}]*\}\s*:\s*([\d.Ee+-]+|NaN)\s*$", re.M)


def producer_perf(bootstrap, topic, n, warmup, props, throughput, timeout,
                  payload_file=None) -> dict:
    """payload_file: records are lines of that file (each RECORD_SIZE bytes), else the tool's
    random A-Z payload of RECORD_SIZE bytes."""
    payload = (["--payload-file", payload_file, "--print-metrics"] if payload_file
               else ["--record-size", RECORD_SIZE])
    cmd = kafka_tools.tool_command(
        kafka_tools.PRODUCER_PERF_TEST, "--bootstrap-server", bootstrap, "--topic", topic,
        "--num-records", n, "--warmup-records", warmup, *payload,
        "--throughput", throughput, "--command-property", *props)
    p = run(cmd, timeout)
    lines = {}
    for m in PP_LINE.finditer(p.stdout):
        lines["steady" if m.group(2) else "all"] = m
    m = lines.get("steady") or lines.get("all")
    if p.returncode != 0 or m is None:
        raise RuntimeError(f"ProducerPerformance exit {p.returncode}\n{tail(p.stdout)}\n{tail(p.stderr)}")
    rps = float(m.group(3))
    res = {"records/s": rps, "MiB/s": rps * RECORD_SIZE / 2**20, "_records": n,
           "avg ms": float(m.group(5)), "p50 ms": float(m.group(7)),
           "p99 ms": float(m.group(9)), "p99.9 ms": float(m.group(10))}
    if payload_file:
        c = PP_COMPRESSION.search(p.stdout)
        if c and c.group(1) != "NaN":
            res[COMPRESSED_METRIC] = float(c.group(1))
    return res


def consumer_perf(bootstrap, topic, n, timeout) -> dict:
    # Full JIT (not kafka_tools' quick-start C1 options): this measures throughput.
    cmd = ["java", *kafka_tools.JVM_OPTS, "-cp", kafka_tools.classpath(),
           f"-Dlog4j2.configurationFile={kafka_tools.LOG4J2_CONFIG}",
           "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(n), "--timeout", "20000",
           "--group", f"bench-{topic}-{time.time_ns()}"]
    p = run(cmd, timeout)
    rows = [l for l in p.stdout.splitlines() if re.match(r"^\d{4}-\d\d-\d\d ", l)]
    if p.returncode != 0 or not rows:
        raise RuntimeError(f"ConsumerPerformance exit {p.returncode}\n{tail(p.stdout)}\n{tail(p.stderr)}")
    f = [x.strip() for x in rows[-1].split(",")]
    if int(f[4]) < n:
        raise RuntimeError(f"ConsumerPerformance consumed {f[4]} of {n} records")
    return {"records/s": float(f[9]), "MiB/s": float(f[8]), "_records": n}


RK_PRODUCED = re.compile(r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered .*? in (\d+)ms: (\d+) msgs/s")
RK_CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s")


def rdkafka_produce(binary, bootstrap, topic, n, timeout) -> dict:
    # rdkafka_performance sets linger.ms=1000 of its own; put back librdkafka's default.
    cmd = [binary, "-P", "-t", topic, "-b", bootstrap, "-s", RECORD_SIZE, "-c", n,
           "-a", "-1", "-X", "enable.idempotence=true", "-X", "linger.ms=5", "-i", "600000"]
    p = run(cmd, timeout)
    ms = RK_PRODUCED.findall(p.stdout + p.stderr)
    if p.returncode != 0 or not ms or int(ms[-1][2]) != n:
        raise RuntimeError(f"rdkafka_performance -P exit {p.returncode}\n{tail(p.stdout)}\n{tail(p.stderr)}")
    rps = int(ms[-1][2]) / (int(ms[-1][3]) / 1000.0)
    return {"records/s": rps, "MiB/s": rps * RECORD_SIZE / 2**20, "_records": n}


def rdkafka_consume(binary, bootstrap, topic, partitions, n, timeout) -> dict:
    cmd = [binary, "-C", "-t", topic, "-b", bootstrap, "-o", "beginning", "-c", n, "-e",
           "-i", "600000"]
    for i in range(partitions):
        cmd += ["-p", i]
    p = run(cmd, timeout)
    ms = RK_CONSUMED.findall(p.stdout + p.stderr)
    if p.returncode != 0 or not ms or int(ms[-1][0]) < n:
        raise RuntimeError(f"rdkafka_performance -C exit {p.returncode}\n{tail(p.stdout)}\n{tail(p.stderr)}")
    got, _, elapsed_ms, _ = ms[-1]
    rps = int(got) / max(int(elapsed_ms) / 1000.0, 1e-3)
    return {"records/s": rps, "MiB/s": rps * RECORD_SIZE / 2**20, "_records": n}


# --------------------------------------------------------------------------- a round

def one_round(broker, cfg, rdkafka_bin, record, groups=GROUPS, payload_file=None):
    """Runs the figures of `groups` against a started-then-stopped broker;
    record(figure, dict|exc)."""
    timeout = cfg["tool_timeout"]
    log(f"{broker.label}: starting")
    try:
        startup = broker.start(deadline_s=120)
    except Exception as e:  # noqa: BLE001  e.g. a port taken between the check and the bind
        log(f"{broker.label}: start failed, retrying once on other ports: "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
        broker.stop()
        startup = broker.start(deadline_s=120)
    record("start-up", {"to first ack s": startup})
    extra = {}
    if isinstance(broker, Kafka):
        extra["format_s"] = broker.format_seconds
    log(f"{broker.label}: first produce acknowledged {startup * 1000:.0f} ms after process start {extra or ''}")
    time.sleep(cfg["idle_settle"])
    record("memory", {"idle RSS MiB": proc_status(broker.pid).get("VmRSS")})
    b = broker.bootstrap
    keys = kwire.api_keys("127.0.0.1", broker.port)
    has_groups = {kwire.API_FIND_COORDINATOR, kwire.API_JOIN_GROUP,
                  kwire.API_SYNC_GROUP} <= keys

    def step(figure, fn):
        with LoadMeter(lambda: broker.pid) as lm:
            try:
                res = fn()
            except Exception as e:  # noqa: BLE001  recorded, reported, never fatal here
                res = e
        if isinstance(res, dict) and "_records" in res:
            mib = res.pop("_records") * RECORD_SIZE / 2**20
            res["broker CPU ms/MiB"] = lm.broker_cpu_s * 1000.0 / mib
        record(figure, res, lm.result)
        if isinstance(res, dict):
            key = "records/s" if "records/s" in res else next(iter(res))
            log(f"{broker.label}: {figure}: " + ", ".join(f"{k} {v:,.1f}" for k, v in res.items())
                + f"  [foreign load {lm.result['foreign_cores']} cores]")
        else:
            log(f"{broker.label}: {figure}: {type(res).__name__}: {str(res).splitlines()[0] if str(res) else ''}")

    for acks in ("1", "all") if "produce" in groups else ():
        for parts in (1, 8):
            for batching in ("default", "throughput"):
                topic = f"pp-acks{acks}-p{parts}-{batching}"
                n = cfg["produce_" + batching]

                def produce(topic=topic, n=n, parts=parts, acks=acks, batching=batching):
                    create_topic(b, topic, parts)
                    return producer_perf(b, topic, n, n // 10, ACKS[acks] + BATCHING[batching],
                                         -1, timeout)
                step(f"java produce acks={acks} p={parts} {batching}", produce)

    for parts in (1, 8) if "consume" in groups else ():
        topic = f"pp-acks1-p{parts}-throughput"
        n = cfg["produce_throughput"]

        def consume(topic=topic, n=n):
            if not has_groups:
                raise Unsupported("ConsumerPerformance joins a consumer group; the broker "
                                  "serves no FindCoordinator/JoinGroup/SyncGroup")
            return consumer_perf(b, topic, n, timeout)
        step(f"java consume p={parts}", consume)

    def latency():
        topic = "pp-fixed-rate"
        create_topic(b, topic, 1)
        n = cfg["latency"]
        return producer_perf(b, topic, n, n // 11, ACKS["all"] + BATCHING["default"],
                             FIXED_RATE, timeout)
    if "latency" in groups:
        step(f"java produce at {FIXED_RATE} rec/s acks=all p=1", latency)

    for parts in (1, 8) if "rdkafka" in groups else ():
        topic = f"rk-p{parts}"
        n = cfg["rdkafka"]

        def rk_produce(topic=topic, parts=parts, n=n):
            create_topic(b, topic, parts)
            return rdkafka_produce(rdkafka_bin, b, topic, n, timeout)
        step(f"rdkafka produce acks=all p={parts}", rk_produce)
        step(f"rdkafka consume p={parts}",
             lambda topic=topic, parts=parts, n=n: rdkafka_consume(rdkafka_bin, b, topic, parts, n, timeout))

    # Last, so that the figures above are measured as before these existed.
    for codec in CODECS if "codecs" in groups else ():
        topic = f"pp-text-{codec}"
        n = cfg["codec"]

        def produce_codec(topic=topic, n=n, codec=codec):
            create_topic(b, topic, 1)
            return producer_perf(b, topic, n, n // 10, ACKS["1"] + BATCHING["throughput"]
                                 + [f"compression.type={codec}"], -1, timeout, payload_file)
        step(codec_figure(codec), produce_codec)

    # Issue 11's row: the HTTP API's produce beside the Kafka protocol's, the same work in
    # the same shape (requests of 100 records, acks=1, one partition, one request in flight
    # per connection, from the same Python client; see http_produce.py).
    for conns in (1, 4) if "http" in groups else ():
        for side in ("kafka", "http"):
            def requests(side=side, conns=conns):
                if side == "http" and broker.http_port is None:
                    raise Unsupported("no HTTP API (Kafka, or a runnel build from before it)")
                topic = f"req100-{side}-c{conns}"
                create_topic(b, topic, 1)
                port = broker.port if side == "kafka" else broker.http_port
                # The same number of requests on every row and broker, each row starting
                # with no dirty pages: a faster row would otherwise write more, reach the
                # kernel's dirty limit sooner and be held to the disk's writeback speed
                # in the rows after it (seen: runnel's 4-connection row fell to 0.6x
                # Kafka's after its 1-connection row had written 4 GB in 10 s).
                os.sync()
                r = http_produce.measure(side, "127.0.0.1", port, topic, http_produce.ascii_value(RECORD_SIZE),
                                         conns, timeout, broker.pid, requests=cfg["http_requests"])
                return {"records/s": r["records/s"], "MiB/s": r["MiB/s"],
                        "request p50 ms": r["request p50 ms"], "request p99 ms": r["request p99 ms"],
                        "_records": r["records"]}
            proto = "Kafka protocol" if side == "kafka" else "HTTP POST"
            step(f"100-record produce requests, {proto}, acks=1 p=1 c={conns}", requests)

    record("memory", {"peak RSS MiB": proc_status(broker.pid).get("VmHWM")})


def codec_figure(codec: str) -> str:
    return f"java produce text {codec + ' ' if codec != 'none' else ''}acks=1 p=1 throughput"


# --------------------------------------------------------------------------- summary

LOWER_IS_BETTER = ("ms", " s", "MiB")  # suffixes of metric names where less is better
# The producer's compressed/uncompressed batch size: a property of the payload and the client
# (the same for both brokers up to batch fill), shown for reference, neither better nor worse.
COMPRESSED_METRIC = "compressed/raw"
NEUTRAL = (COMPRESSED_METRIC,)


def lower_is_better(metric: str) -> bool:
    return metric.endswith(LOWER_IS_BETTER) and not metric.endswith("MiB/s")


def better(metric: str) -> str:
    return "-" if metric in NEUTRAL else "lower" if lower_is_better(metric) else "higher"


def summarise(rounds):
    """rounds: list of {broker, round, figures: {figure: {metric: value}|{"error"|"n/a": msg}}}"""
    figures, metrics = [], {}
    for r in rounds:  # figures in the order they ran, metrics in the order reported
        for fig, res in r["figures"].items():
            if fig not in metrics:
                figures.append(fig)
                metrics[fig] = []
            for metric in (res.get("values") or {}):
                if metric not in metrics[fig]:
                    metrics[fig].append(metric)
    order = [(fig, m) for fig in figures for m in metrics[fig]]
    rows = []
    for fig, metric in order:
        row = {"figure": fig, "metric": metric, "better": better(metric)}
        per_round = {}
        for side in ("runnel", "kafka"):
            vals = []
            for r in rounds:
                if r["broker"] != side:
                    continue
                v = (r["figures"].get(fig, {}).get("values") or {}).get(metric)
                if v is not None:
                    vals.append(v)
                    per_round.setdefault(r["round"], {})[side] = v
            row[side] = ({"median": statistics.median(vals), "min": min(vals), "max": max(vals),
                          "values": vals} if vals else None)
        ratios = [p["runnel"] / p["kafka"] for p in per_round.values()
                  if "runnel" in p and "kafka" in p and p["kafka"]]
        if row["runnel"] and row["kafka"] and row["kafka"]["median"]:
            row["ratio"] = {"median": row["runnel"]["median"] / row["kafka"]["median"],
                            "min": min(ratios) if ratios else None,
                            "max": max(ratios) if ratios else None}
        else:
            row["ratio"] = None
        rows.append(row)
    # Figures a broker could not run at all.
    missing = {}
    for r in rounds:
        for fig, res in r["figures"].items():
            for kind in ("n/a", "error"):
                if kind in res:
                    missing.setdefault((fig, r["broker"], kind), res[kind].splitlines()[0])
    return rows, [dict(figure=f, broker=b, kind=k, reason=m) for (f, b, k), m in missing.items()]


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    return f"{v:,.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 0.1 else f"{v:.3f}"


def cell(s):
    if not s:
        return "n/a"
    if s["min"] == s["max"]:
        return fmt(s["median"])
    return f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"


def rfmt(x):
    return f"{x:.2f}" if x >= 0.095 else f"{x:.1g}" if x >= 0.001 else f"{x:.1e}"


def ratio_cell(r):
    if not r:
        return "n/a"
    if r["min"] is None or r["min"] == r["max"]:
        return rfmt(r["median"])
    return f"{rfmt(r['median'])} ({rfmt(r['min'])}–{rfmt(r['max'])})"


# How the second column is named: Kafka, or a --baseline runnel binary.
SECOND = {"column": "Kafka 4.4", "ratio": "runnel/Kafka", "title": "Apache Kafka 4.4", "side": "kafka"}


def http_vs_kafka(rows) -> str:
    """The http group's own comparison: runnel's HTTP API against its Kafka protocol."""
    by = {(r["figure"], r["metric"]): r for r in rows}
    out = []
    for fig, metric in by:
        if not fig.startswith("100-record produce requests, HTTP POST") or metric == "MiB/s":
            continue
        kafka = by.get((fig.replace("HTTP POST", "Kafka protocol"), metric))
        h, k = by[(fig, metric)]["runnel"], kafka and kafka["runnel"]
        if h and k and k["median"]:
            out.append(f"* {fig.split(', ')[-1]} · {metric}: {h['median'] / k['median']:.2f}")
    if not out:
        return ""
    return ("\n\nrunnel's HTTP API / runnel's Kafka protocol, same requests (medians):\n"
            + "\n".join(out))


def table(rows, missing) -> str:
    head = ["figure", "metric", "runnel", SECOND["column"], SECOND["ratio"], "better"]
    body = []
    for r in rows:
        body.append([r["figure"], r["metric"], cell(r["runnel"]), cell(r["kafka"]),
                     ratio_cell(r["ratio"]), r["better"]])
    widths = [max(len(str(x[i])) for x in [head] + body) for i in range(len(head))]
    line = lambda cols: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cols, widths)) + " |"
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(b) for b in body]
    for m in missing:
        side = SECOND["side"] if m["broker"] == "kafka" else m["broker"]
        out.append(f"\n{m['kind']}: {m['figure']} on {side}: {m['reason']}")
    return "\n".join(out)


def chart(rows, missing, meta, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keep = [r for r in rows if r["ratio"] and r["metric"] in
            ("records/s", "p99 ms", "broker CPU ms/MiB", "to first ack s", "idle RSS MiB",
             "peak RSS MiB")
            and not (r["figure"].startswith("java produce at") and r["metric"] == "records/s")]
    if not keep:
        return
    labels = [f"{r['figure']} · {r['metric']}" for r in keep]
    med = [r["ratio"]["median"] for r in keep]
    lo = [r["ratio"]["median"] - (r["ratio"]["min"] if r["ratio"]["min"] is not None else r["ratio"]["median"]) for r in keep]
    hi = [(r["ratio"]["max"] if r["ratio"]["max"] is not None else r["ratio"]["median"]) - r["ratio"]["median"] for r in keep]
    good = [(m >= 1) if r["better"] == "higher" else (m <= 1) for m, r in zip(med, keep)]
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(keep) + 2.2))
    y = list(range(len(keep)))[::-1]
    # Bars grow from 1 (parity) towards the ratio, on a log axis.
    ax.barh(y, [m - 1 for m in med], left=1, xerr=[lo, hi], color=["#3a923a" if g else "#c0392b" for g in good],
            alpha=0.85, error_kw=dict(ecolor="#333", capsize=2, lw=0.8))
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel(f"{SECOND['ratio']} (median of rounds; whiskers: min–max of per-round ratios)."
                  "  green: runnel better")
    m = meta["machine"]
    only = "" if len(meta["groups"]) == len(GROUPS) else f" (only {', '.join(meta['groups'])})"
    ax.set_title(f"runnel vs {SECOND['title']} — {meta['mode']} run{only}, {meta['rounds']} rounds each, "
                 f"{m['date']}\n{m['nproc']} cores, {m['mem_gib']} GiB, Linux {m['kernel']}; "
                 f"other load during run: {meta['load']['foreign_cores_mean']} cores mean, "
                 f"{meta['load']['foreign_cores_max']} max", fontsize=8)
    for yy, v in zip(y, med):
        ax.text(max(v, 1) * 1.02, yy, f"{v:.3g}", va="center", fontsize=6)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def machine_info(runnel_bin: str) -> dict:
    mem_kib = int(next(l for l in Path("/proc/meminfo").read_text().splitlines()
                       if l.startswith("MemTotal")).split()[1])
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True).stdout.strip() != ""
    except OSError:
        commit, dirty = "?", False
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    runnel = commit + ("+dirty src" if dirty else "")
    if Path(runnel_bin).resolve() != (REPO / "target" / "release" / "runnel").resolve():
        runnel = f"binary {runnel_bin} (RUNNEL_BIN; checkout at {runnel})"
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "cpu": cpu, "mem_gib": round(mem_kib / 2**20, 1),
            "kernel": platform.release(), "java": java[0] if java else "?",
            "runnel_commit": runnel,
            "kafka_version": kafka_tools.KAFKA_VERSION}


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round each")
    ap.add_argument("--rounds", type=int, help="rounds per broker (default: 3, smoke 1)")
    ap.add_argument("--out", default=str(HERE / "results"), help="results directory")
    ap.add_argument("--only", metavar="GROUP[,GROUP...]",
                    help=f"run only these figure groups ({', '.join(GROUPS)}); start-up and "
                         "memory are always measured. consume reads what produce writes, so it "
                         "brings produce along")
    ap.add_argument("--baseline", metavar="BINARY",
                    help="another runnel binary in Kafka's place (an A/B of two builds)")
    ap.add_argument("--runnel", required=True)
    ap.add_argument("--rdkafka-performance", required=True)
    args = ap.parse_args()
    if args.baseline:
        if not os.access(args.baseline, os.X_OK):
            ap.error(f"--baseline: {args.baseline} is not an executable")
        SECOND.update(column="baseline runnel", ratio="runnel/baseline",
                      title=f"baseline runnel {args.baseline}", side="baseline")

    mode = "smoke" if args.smoke else "full"
    groups = GROUPS
    if args.only:
        wanted = {g.strip() for g in args.only.split(",") if g.strip()}
        unknown = wanted - set(GROUPS)
        if unknown or not wanted:
            ap.error(f"--only: unknown group(s) {', '.join(sorted(unknown)) or '(none given)'}; "
                     f"choose from {', '.join(GROUPS)}")
        if "consume" in wanted:
            wanted.add("produce")
        groups = tuple(g for g in GROUPS if g in wanted)
    cfg = dict(PROFILES[mode])
    if args.rounds:
        cfg["rounds"] = args.rounds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = CACHE / "bench" / "work"  # runnel data dirs (removed per round) and logs (last run)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    payload_file = None
    if "codecs" in groups:
        payload_file = payloads.write_payload_file(
            WORK / f"payload-text-{cfg['payload_lines']}x{RECORD_SIZE}.txt",
            cfg["payload_lines"], RECORD_SIZE)
    meta = {"mode": mode, "rounds": cfg["rounds"], "sizes": cfg, "record_size": RECORD_SIZE,
            "groups": list(groups), "payload_file": str(payload_file) if payload_file else None,
            "machine": machine_info(args.runnel), "loadavg_at_start": os.getloadavg(),
            "baseline": args.baseline}
    log(f"{mode} run, {cfg['rounds']} round(s) per broker, figures: {', '.join(groups)}; "
        f"load average {os.getloadavg()}")
    rounds, steps_load, failures = [], [], []
    brokers = [Runnel(args.runnel, work),
               Runnel(args.baseline, work, side="kafka") if args.baseline else Kafka()]
    for rnd in range(1, cfg["rounds"] + 1):
        for broker in brokers:
            entry = {"broker": broker.name, "round": rnd, "figures": {}, "load": {}}
            rounds.append(entry)

            def record(figure, res, load=None, entry=entry, broker=broker):
                f = entry["figures"].setdefault(figure, {})
                if isinstance(res, Unsupported):
                    f["n/a"] = str(res)
                elif isinstance(res, Exception):
                    f["error"] = f"{type(res).__name__}: {res}"
                    failures.append(f"{broker.label} round {rnd}: {figure}: {f['error']}")
                else:
                    f.setdefault("values", {}).update({k: v for k, v in res.items() if v is not None})
                if load:
                    entry["load"][figure] = load
                    steps_load.append(load)
            try:
                one_round(broker, cfg, args.rdkafka_performance, record, groups, payload_file)
            except Exception as e:  # noqa: BLE001
                record("round", e)
                log(f"{broker.label} round {rnd} aborted: {e}")
            finally:
                broker.stop()

    rows, missing = summarise(rounds)
    fc = [s["foreign_cores"] for s in steps_load]
    la = [s["loadavg1"] for s in steps_load]
    meta["load"] = {"foreign_cores_mean": round(statistics.mean(fc), 2) if fc else None,
                    "foreign_cores_max": round(max(fc), 2) if fc else None,
                    "loadavg1_mean": round(statistics.mean(la), 2) if la else None,
                    "loadavg1_max": round(max(la), 2) if la else None,
                    "note": "foreign_cores: CPU used by processes other than the broker and "
                            "the benchmark's clients, per step; loadavg1 includes both"}
    meta["duration_s"] = round(time.monotonic() - started, 1)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    subset = ("" if groups == GROUPS else "-" + "+".join(groups)) + ("-ab" if args.baseline else "")
    base = out / f"{stamp}-{mode}{subset}"
    txt = table(rows, missing) + http_vs_kafka(rows)
    versus = (f"baseline runnel {args.baseline} (in the Kafka column)" if args.baseline
              else f"Apache Kafka {meta['machine']['kafka_version']}")
    head = (f"runnel vs {versus}: {mode} run, "
            f"{cfg['rounds']} rounds each, {meta['machine']['date']}\n"
            f"machine: {meta['machine']['nproc']} cores ({meta['machine']['cpu']}), "
            f"{meta['machine']['mem_gib']} GiB, Linux {meta['machine']['kernel']}, "
            f"{meta['machine']['java']}; runnel {meta['machine']['runnel_commit']}\n"
            + (f"figures: only {', '.join(groups)} (and start-up, memory)\n" if subset else "")
            + f"load by others during the run: {meta['load']['foreign_cores_mean']} cores mean, "
            f"{meta['load']['foreign_cores_max']} max; 1-min load average "
            f"{meta['load']['loadavg1_mean']} mean, {meta['load']['loadavg1_max']} max "
            f"(includes the benchmark); duration {meta['duration_s']} s\n"
            f"cells: median (min–max) over rounds; ratio: {SECOND['ratio']} of the medians "
            f"(min–max of per-round ratios). Record size {RECORD_SIZE} B, MiB = 2^20 B.\n")
    json.dump({"meta": meta, "summary": rows, "missing": missing, "rounds": rounds},
              open(f"{base}.json", "w"), indent=1)
    Path(f"{base}.md").write_text(head + "\n" + txt + "\n")
    try:
        chart(rows, missing, meta, Path(f"{base}.png"))
    except Exception as e:  # noqa: BLE001
        failures.append(f"chart: {e}")
    print(head)
    print(txt)
    print(f"\nresults: {base}.json, {base}.md, {base}.png")
    if failures:
        print("\nmeasurements that could not be taken:", file=sys.stderr)
        for f in failures:
            print("  " + f.splitlines()[0], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
