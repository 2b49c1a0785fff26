"""An Apache Kafka 4.4 KRaft cluster in the same network-namespace harness as runnel's
(netns.py): one namespace per node on a bridge, every node a broker and a controller
quorum voter (combined roles, runnel's default), listening on <ns ip>:9092 (clients and
replication) and <ns ip>:9093 (controller), so that faults (SIGKILL, SIGSTOP, iptables)
and measurements are the same for both systems.

The jars are the reference harness's (setup/kafka.sh, cached); the heap and collector
are its line in kafka/broker-jvm.opts; each node's server.properties comes from
kafka/cluster-server.properties.template (Kafka's defaults otherwise). Every JVM is
started with PR_SET_PDEATHSIG, so it dies with the harness; `stop_all` is bounded
(SIGTERM, then SIGKILL after a grace period).

    net = netns.Network(["n1", "n2", "n3", "client"]).up()
    nodes = start_kafka_cluster(net, ["n1", "n2", "n3"], workdir)
    ...
    stop_all(nodes); net.down()

By hand: `python3 compat-tests/cluster/kafka_cluster.py --seconds 900` (see `main`).
"""
import base64
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import netns

HERE = Path(__file__).resolve().parent
COMPAT = HERE.parent
sys.path.insert(0, str(COMPAT))

import kafka_tools  # noqa: E402  (compat-tests/kafka_tools.py)

TEMPLATE = COMPAT / "kafka" / "cluster-server.properties.template"
JVM_OPTS_FILE = COMPAT / "kafka" / "broker-jvm.opts"
LOG4J2 = COMPAT / "kafka" / "log4j2-broker.xml"
PORT = 9092
CONTROLLER_PORT = 9093


def cluster_id() -> str:
    """16 random bytes, URL-safe base64 without padding, never starting with '-' (the
    storage tool would take it for an option)."""
    while True:
        c = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not c.startswith("-"):
            return c


def broker_jvm_opts() -> list:
    return JVM_OPTS_FILE.read_text().split()


class KafkaNode(netns.Node):
    """One Kafka broker+controller JVM in its namespace: a netns.Node (address,
    wait_listening, signals, pause, resume) that launches Kafka instead of runnel."""

    def __init__(self, net, host, node_id, voters, workdir: Path, libs: Path):
        self.net, self.host, self.node_id = net, host, node_id
        self.dir = Path(workdir) / host
        self.data_dir = self.dir / "data"
        self.port = PORT
        self.libs = libs
        self.proc = None
        self.starts = 0
        self.log_path = self.dir / "stdout.log"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties = self.dir / "server.properties"
        self.properties.write_text(
            TEMPLATE.read_text().replace("@NODE_ID@", str(node_id))
            .replace("@HOST@", net.ips[host]).replace("@VOTERS@", voters)
            .replace("@LOG_DIR@", str(self.data_dir)))

    def _java(self):
        return ["java", "-cp", f"{self.libs}/*", f"-Dlog4j2.configurationFile={LOG4J2}",
                f"-Dkafka.logs.dir={self.dir}", "-Djava.awt.headless=true"]

    def format_command(self, cid):
        return (self._java()[:1] + ["-Xmx256m"] + self._java()[1:]
                + ["kafka.tools.StorageTool", "format", "--config", str(self.properties),
                   "--cluster-id", cid])

    def launch(self):
        log = open(self.log_path, "ab")
        args = self._java()[:1] + broker_jvm_opts() + self._java()[1:] + ["kafka.Kafka", str(self.properties)]
        self.proc = self.net.popen(self.host, args, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, preexec_fn=netns.die_with_parent)
        log.close()
        self.starts += 1
        return self

    def start(self, timeout=90.0):
        return super().start(timeout)

    def log_hint(self):
        return f"see {self.dir}/server.log and {self.log_path}"

    def stop(self, timeout=20):
        stop_all([self], timeout)


def start_kafka_cluster(net, hosts, workdir: Path, timeout=120.0):
    """Formats a log dir per node with one cluster id, starts every node and waits until
    each listens. Returns the nodes (node ids 1..n in the order of `hosts`); on failure
    stops what it started and raises."""
    libs = kafka_tools.ensure_jars()
    voters = ",".join(f"{i + 1}@{net.ips[h]}:{CONTROLLER_PORT}" for i, h in enumerate(hosts))
    nodes = [KafkaNode(net, h, i + 1, voters, workdir, libs) for i, h in enumerate(hosts)]
    cid = cluster_id()
    formats = [subprocess.Popen(n.format_command(cid), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, preexec_fn=netns.die_with_parent)
               for n in nodes]
    try:
        for n, p in zip(nodes, formats):
            out, _ = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"kafka-storage format for {n.host} failed:\n{out[-2000:]}")
        for n in nodes:
            n.launch()
        deadline = time.monotonic() + timeout
        for n in nodes:
            n.wait_listening(max(deadline - time.monotonic(), 1.0))
    except BaseException:
        for p in formats:
            if p.poll() is None:
                p.kill()
        stop_all(nodes, grace=0)
        raise
    return nodes


def stop_all(nodes, grace=10.0):
    """SIGTERM to every live node at once (resumed first if paused), SIGKILL to whatever
    still runs after `grace` seconds; returns when every process is gone. With a quorum
    of controllers gone, Kafka's controlled shutdown cannot finish, so the grace period is
    what bounds the stop."""
    live = [n for n in nodes if n.proc and n.proc.poll() is None]
    for n in live:
        n.signal(signal.SIGCONT)
        n.signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
    deadline = time.monotonic() + grace
    for n in live:
        try:
            n.proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            pass
    for n in live:
        if n.proc.poll() is None:
            n.signal(signal.SIGKILL)
            n.proc.wait(timeout=10)


def main():
    """By hand (root): `python3 compat-tests/cluster/kafka_cluster.py [--nodes 3]
    [--seconds 900]` starts the cluster, prints its bootstrap servers (reachable from the
    root namespace over the bridge), and tears everything down after --seconds, on Ctrl-C
    or on SIGTERM."""
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(description="a 3-node Apache Kafka 4.4 cluster in network namespaces")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=900.0, help="stop after this long (default 900)")
    args = ap.parse_args()
    why = netns.available()
    if why:
        sys.exit(f"kafka_cluster.py: {why}")

    def interrupted(*_):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupted)
    hosts = [f"n{i + 1}" for i in range(args.nodes)]
    net = netns.Network(hosts + ["client"]).up()
    nodes = []
    workdir = Path(tempfile.mkdtemp(prefix="kafka-cluster-"))
    try:
        nodes = start_kafka_cluster(net, hosts, workdir)
        print(",".join(n.address for n in nodes), flush=True)
        print(f"logs in {workdir}; client namespace {net.ns('client')}; stopping in {args.seconds:.0f} s "
              "(Ctrl-C stops now)", file=sys.stderr, flush=True)
        time.sleep(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        stop_all(nodes)
        net.down()


if __name__ == "__main__":
    main()
