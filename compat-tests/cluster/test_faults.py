"""Fault harness: brokers in network namespaces, faults injected while idempotent acks=all
writers and a reader run in a client namespace (`franz workload`), then a full read-back
and the checker (checker.py): no acknowledged write lost, no duplicate, one value per
offset, no per-writer reordering.

Every scenario is bounded (a workload of `FAULT_SECONDS`, default 20 s, plus the
read-back) and stops by itself. Results (counts, faults, acks per second) are printed
and, with FAULT_RESULTS=<file>, appended as JSON lines (scripts/faults-soak.sh).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import netns
from checker import check, read_lines
from cluster_fixtures import (CONTROLLER_PORT, cluster3, cluster5, franz_bin, runnel_bin, start_cluster,  # noqa: F401
                              start_kafka, wait_for, wait_registered)
from kafka_tools import describe, run_tool
from quorum_tools import QUORUM, controller_config, meta_properties, replication_rows, voter_ids

SECONDS = int(os.environ.get("FAULT_SECONDS", "20"))
# Records per second per writer: enough for thousands of acknowledged records per
# scenario, few enough that the read-back and the checker take seconds.
RATE = int(os.environ.get("FAULT_RATE", "2000"))
# FAULT_CLIENT_LOG=info (or warn, debug): the writers' client logs go to workload.err in
# the test's tmp_path, each line stamped with the time and the writer (for a dip's cause).
CLIENT_LOG = os.environ.get("FAULT_CLIENT_LOG", "")
# Seconds of workload before the first fault. franz-go counts its metadata wait
# (MetadataMinAge, 5 s) from its last refresh, the client's start at first: with the
# default 3 s a fault lands inside that wait; past 5 s (scripts/faults-soak.sh runs the
# matrix at 6.5 too) it shows what a long-running client sees.
WARMUP = float(os.environ.get("FAULT_WARMUP", "3.0"))
# FAULT_SYSTEM=kafka runs the replication matrix against a 3-node Apache Kafka 4.4
# cluster in the same namespaces (kafka_cluster.py), for the same figures side by side.
SYSTEM = os.environ.get("FAULT_SYSTEM", "runnel")

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "fault tests start their own brokers")


@pytest.fixture
def single(tmp_path, runnel_bin):
    """One broker (n1) and a client host, each in its own namespace."""
    net = netns.Network(["n1", "client"]).up()
    node = netns.Node(net, "n1", runnel_bin, tmp_path / "n1")
    try:
        node.start()
        yield net, [node]
    finally:
        node.stop()
        net.down()


class Nemesis:
    """Injects `fault` then `heal` every cycle between a warm-up and a cool-down, on its
    own thread, counting the faults it injected."""

    def __init__(self, name, fault, heal, hold=3.0, gap=3.0):
        self.name, self.fault, self.heal = name, fault, heal
        self.hold, self.gap = hold, gap
        self.injected = 0
        self.errors = []
        self._stop = threading.Event()
        self._thread = None

    def start(self, warmup, until):
        def loop():
            if self._stop.wait(warmup):
                return
            while time.monotonic() + self.hold < until and not self._stop.is_set():
                try:
                    self.fault()
                    self.injected += 1
                    self._stop.wait(self.hold)
                finally:
                    try:
                        self.heal()
                    except Exception as e:  # noqa: BLE001 - reported by the test
                        self.errors.append(repr(e))
                if self._stop.wait(self.gap):
                    return

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def join(self):
        self._stop.set()
        self._thread.join(timeout=60)


def new_topic(scenario):
    return f"faults-{scenario}-{uuid.uuid4().hex[:8]}"


def run_scenario(tmp_path, net, nodes, franz, nemesis, *, writers=3, partitions=3, rf=1, min_isr=0,
                 topic=None, seconds=SECONDS):
    topic = topic or new_topic(nemesis.name)
    acks, observed = tmp_path / "acks.jsonl", tmp_path / "observed.jsonl"
    bootstrap = ",".join(n.address for n in nodes)
    err = open(tmp_path / "workload.err", "wb")
    started = time.monotonic()
    workload = net.popen("client", [franz, "workload", "-brokers", bootstrap, "-topic", topic,
                                    "-writers", writers, "-partitions", partitions, "-rf", rf,
                                    "-min-isr", min_isr, "-duration", f"{seconds}s", "-rate", RATE,
                                    "-acks", acks, "-observed", observed,
                                    *(["-log", CLIENT_LOG] if CLIENT_LOG else [])],
                         stdout=subprocess.PIPE, stderr=err)
    nemesis.start(warmup=WARMUP, until=started + seconds - 3.0)
    try:
        out, _ = workload.communicate(timeout=seconds + 180)
    finally:
        nemesis.join()
        if workload.poll() is None:
            workload.kill()
    assert workload.returncode == 0, (tmp_path / "workload.err").read_text()[-3000:]
    assert not nemesis.errors, nemesis.errors
    summary = json.loads(out.decode().strip().splitlines()[-1])
    final = net.run("client", [franz, "readall", "-brokers", bootstrap, "-topic", topic,
                               "-timeout", "60s"], timeout=120, capture_output=True, text=True)
    assert final.returncode == 0, final.stderr[-3000:]
    (tmp_path / "final.jsonl").write_text(final.stdout)
    report = check(read_lines(acks), read_lines(observed), read_lines(tmp_path / "final.jsonl"))
    result = {
        "scenario": nemesis.name, "system": "kafka" if nodes[0].__class__.__name__ == "KafkaNode" else "runnel",
        "brokers": len(nodes), "rf": rf, "seconds": seconds, "warmup": WARMUP,
        "faults": nemesis.injected, **report.summary(),
        "acks_per_second": summary["acks_per_second"],
    }
    print(json.dumps(result))
    if os.environ.get("FAULT_RESULTS"):
        with open(os.environ["FAULT_RESULTS"], "a") as f:
            f.write(json.dumps(result) + "\n")
    assert nemesis.injected > 0, "the nemesis never fired"
    assert report.acked > 0, "nothing was acknowledged"
    assert report.ok(), json.dumps(report.anomalies(), indent=1)[:4000]
    return result


def test_single_node_crash_restart(tmp_path, single, franz_bin):
    """SIGKILL the broker and start it again on the same data dir: nothing acknowledged is
    lost (acks=all on one node means the leader's log), the idempotent producers' retries
    are deduplicated by the producer state rebuilt from the log."""
    net, (node,) = single

    def restart():
        node.start()

    run_scenario(tmp_path, net, [node], franz_bin, Nemesis("crash", node.kill, restart, hold=1.0))


def test_single_node_pause(tmp_path, single, franz_bin):
    """SIGSTOP/SIGCONT: requests time out and are retried; nothing is duplicated."""
    net, (node,) = single
    run_scenario(tmp_path, net, [node], franz_bin, Nemesis("pause", node.pause, node.resume))


def test_single_node_client_partition(tmp_path, single, franz_bin):
    """The client's link to the broker is cut (packets dropped both ways), then healed."""
    net, (node,) = single
    run_scenario(tmp_path, net, [node], franz_bin,
                 Nemesis("client-partition", lambda: net.partition("client", "n1"), net.heal))


def test_the_harness_cuts_and_heals_links(single):
    """The partition primitive really drops traffic, and heal restores it."""
    net, (node,) = single
    probe = ["python3", "-c", f"import socket; socket.create_connection(('{net.ips['n1']}', {node.port}), 1)"]
    assert net.run("client", probe, timeout=10, capture_output=True).returncode == 0
    net.partition("client", "n1")
    assert net.run("client", probe, timeout=10, capture_output=True).returncode != 0
    net.heal()
    assert net.run("client", probe, timeout=10, capture_output=True).returncode == 0
    assert node.proc.pid == int(Path(f"/proc/{node.proc.pid}/stat").read_text().split()[0])
    assert os.path.basename(os.readlink(f"/proc/{node.proc.pid}/exe")).startswith("runnel")


# ---- a replicated cluster: three brokers, combined broker+controller roles -------------

# Long enough for the controller to fence a dead broker (broker.session.timeout.ms, 9 s)
# and for the partition to get a new leader before the fault heals.
CLUSTER_HOLD = float(os.environ.get("FAULT_CLUSTER_HOLD", "12"))


def partition_leader(net, nodes, franz, topic, partition=0):
    """The node leading `partition` of `topic`, as Metadata says (retried while there is
    none, e.g. right after creation)."""
    bootstrap = ",".join(n.address for n in nodes)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p = net.run("client", [franz, "leaders", "-brokers", bootstrap, "-topic", topic],
                    timeout=30, capture_output=True, text=True)
        if p.returncode == 0:
            for row in map(json.loads, p.stdout.splitlines()):
                if row["p"] == partition and row["leader"] >= 1:
                    return nodes[row["leader"] - 1]
        time.sleep(0.5)
    raise AssertionError(f"no leader for {topic}[{partition}]")


def offsets_partition(group, partitions=50):
    """The `__consumer_offsets` partition of `group`: Kafka's
    `Utils.abs(groupId.hashCode()) % partitions` (Java's String.hashCode over UTF-16 code
    units; `Utils.abs` maps Integer.MIN_VALUE to 0)."""
    h = 0
    for unit in _utf16_units(group):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _utf16_units(s):
    b = s.encode("utf-16-be")
    return [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]


def group_coordinator(net, nodes, franz, group):
    """The node coordinating `group`: the leader of its partition of __consumer_offsets."""
    return partition_leader(net, nodes, franz, "__consumer_offsets", offsets_partition(group))


def controller_leader(net, nodes, franz):
    """The node leading the controller quorum, as DescribeQuorum says (retried while
    there is none, e.g. during an election)."""
    bootstrap = ",".join(n.address for n in nodes)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p = net.run("client", [franz, "quorum", "-brokers", bootstrap], timeout=30, capture_output=True, text=True)
        if p.returncode == 0:
            leader = json.loads(p.stdout)["leader"]
            if leader >= 1:
                return nodes[leader - 1]
        time.sleep(0.5)
    raise AssertionError("no controller quorum leader")


def broker_of(net, nodes, franz, kind, topic):
    """Kafka's replication test aims at "leader" (of the topic's partition 0) or at
    "controller" (the quorum leader)."""
    if kind == "controller":
        return controller_leader(net, nodes, franz)
    return partition_leader(net, nodes, franz, topic)


class Target:
    """The node a fault hit, so `heal` undoes exactly that fault."""

    def __init__(self):
        self.node = None


def on_leader(net, nodes, franz, topic, hit, act):
    """A fault that finds the current leader of `topic`'s partition 0, records it in
    `hit` and does `act` to it."""
    def fault():
        hit.node = partition_leader(net, nodes, franz, topic)
        act(hit.node)
    return fault


def on_controller(net, nodes, franz, hit, act):
    """A fault that finds the current controller quorum leader, records it in `hit` and
    does `act` to it."""
    def fault():
        hit.node = controller_leader(net, nodes, franz)
        act(hit.node)
    return fault


def split_off(net, nodes, minority):
    """Cut every link between `minority` and the other nodes."""
    for a in minority:
        for b in nodes:
            if b not in minority:
                net.partition(a.host, b.host)


def seeded_rng():
    """The random choices of a nemesis: the same for a given FAULT_SEED."""
    return random.Random(int(os.environ.get("FAULT_SEED", "7")))


def fenced_nodes(nodes):
    """The node ids that a controller fenced for an expired session, from every log."""
    return {int(m) for n in nodes
            for m in re.findall(r"broker session expired; fencing it node_id=(\d+)", n.log_path.read_text())}


def cluster_scenario(tmp_path, net, nodes, franz, name, topic, fault, heal, hold=CLUSTER_HOLD):
    nemesis = Nemesis(name, fault, heal, hold=hold, gap=4.0)
    return run_scenario(tmp_path, net, nodes, franz, nemesis, writers=3, partitions=3, rf=3, min_isr=2,
                        topic=topic)


def test_cluster_leader_kill(tmp_path, cluster3, franz_bin):
    """SIGKILL the leader of partition 0; a new leader is elected from the ISR; the old
    one restarts, truncates to the new leader's log and rejoins."""
    net, nodes = cluster3
    hit, topic = Target(), new_topic("leader")
    fault = on_leader(net, nodes, franz_bin, topic, hit, netns.Node.kill)
    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-kill", topic, fault,
                     lambda: hit.node.start(60))


def test_cluster5_leader_kill(tmp_path, cluster5, franz_bin):
    """Five brokers (five voters), RF=3: the leader of partition 0 is killed and
    restarted."""
    net, nodes = cluster5
    hit, topic = Target(), new_topic("five")
    fault = on_leader(net, nodes, franz_bin, topic, hit, netns.Node.kill)
    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-kill-5", topic, fault, lambda: hit.node.start(60))


def test_cluster_random_kill(tmp_path, cluster3, franz_bin):
    net, nodes = cluster3
    hit = Target()
    rng = seeded_rng()

    def fault():
        hit.node = rng.choice(nodes)
        hit.node.kill()

    cluster_scenario(tmp_path, net, nodes, franz_bin, "random-kill", new_topic("random"), fault,
                     lambda: hit.node.start(60))


def test_cluster_leader_pause(tmp_path, cluster3, franz_bin):
    """SIGSTOP the leader past the broker session timeout: it is fenced and replaced;
    when it resumes, nothing it accepts as a stale leader may be acknowledged."""
    net, nodes = cluster3
    hit, topic = Target(), new_topic("leader")
    fault = on_leader(net, nodes, franz_bin, topic, hit, netns.Node.pause)
    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-pause", topic, fault,
                     lambda: hit.node.resume())


def test_cluster_leader_isolated(tmp_path, cluster3, franz_bin):
    """Cut the leader off from the other brokers (clients still reach it)."""
    net, nodes = cluster3
    hit, topic = Target(), new_topic("leader")

    fault = on_leader(net, nodes, franz_bin, topic, hit, lambda leader: split_off(net, nodes, [leader]))
    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-isolated", topic, fault, net.heal)


def test_cluster_rolling_restart(tmp_path, cluster3, franz_bin):
    """SIGTERM each broker in turn (controlled shutdown moves leadership off first) and
    start it again."""
    net, nodes = cluster3
    order = iter(nodes * 10)
    hit = Target()

    def fault():
        hit.node = next(order)
        hit.node.stop()

    cluster_scenario(tmp_path, net, nodes, franz_bin, "rolling-restart", new_topic("rolling"), fault,
                     lambda: hit.node.start(60), hold=1.0)


def test_cluster_controller_leader_kill(tmp_path, cluster3, franz_bin):
    """SIGKILL the controller quorum leader (in combined mode, also a partition leader and
    replica): the other voters elect a new one, brokers keep heartbeating to it, and the
    killed node restarts, catches up the metadata log and rejoins."""
    net, nodes = cluster3
    hit = Target()
    fault = on_controller(net, nodes, franz_bin, hit, netns.Node.kill)
    cluster_scenario(tmp_path, net, nodes, franz_bin, "controller-kill", new_topic("controller"), fault,
                     lambda: hit.node.start(60))


def test_cluster_controller_leader_pause(tmp_path, cluster3, franz_bin):
    """SIGSTOP the controller quorum leader past the broker session timeout: the other
    voters elect a new one and it fences the paused broker only. The paused leader still
    accepts connections; the brokers' heartbeats forwarded to it once waited there for
    the operation timeout (15 s), past the new leader's first session (9 s from its
    election), and it fenced every broker, leaving every partition leaderless."""
    net, nodes = cluster3
    hit = Target()
    fault = on_controller(net, nodes, franz_bin, hit, netns.Node.pause)
    cluster_scenario(tmp_path, net, nodes, franz_bin, "controller-pause", new_topic("controller"), fault,
                     lambda: hit.node.resume())
    paused = nodes.index(hit.node) + 1
    fenced = fenced_nodes(nodes)
    assert fenced <= {paused}, f"fenced {sorted(fenced)}, paused node {paused}"


def cut_controller_links(net, nodes):
    """Drop controller traffic (the quorum port) between every two nodes, both ways: no
    voter reaches another, and no broker reaches a controller but its own. Broker links
    (replication, clients) stay up."""
    for x in nodes:
        for y in nodes:
            if x is not y:
                for way in ("--dport", "--sport"):
                    netns.sh("iptables", "-A", "INPUT", "-s", net.ips[y.host], "-p", "tcp", way,
                             str(CONTROLLER_PORT), "-j", "DROP", ns=net.ns(x.host))


# Longer than broker.session.timeout.ms (9 s) with room to spare: a controller that came
# back would by then have fenced every broker whose heartbeats it had not seen.
QUORUM_LOST_HOLD = 25.0


def test_cluster_controller_quorum_lost(tmp_path, cluster3, franz_bin):
    """Every controller link cut for longer than a broker session: no voter has a
    majority, so no metadata change commits (a CreateTopics fails), but the partition
    leaders keep serving acks=all produce and fetch with the ISRs they have; when the
    links heal, no broker is fenced and topics can be created again."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    net, nodes = cluster3
    admin = AdminClient({"bootstrap.servers": ",".join(n.address for n in nodes)})
    create = {}

    def try_create():
        name = new_topic("quorum-lost-create")
        try:
            admin.create_topics([NewTopic(name, 1, 3)], request_timeout=20)[name].result(timeout=30)
            create["outcome"] = "created"
        except KafkaException as e:
            create["outcome"] = e.args[0].name()
        create["before_heal"] = "healed" not in create

    def fault():
        cut_controller_links(net, nodes)
        create["thread"] = threading.Timer(3.0, try_create)
        create["thread"].start()

    def heal():
        create["healed"] = True
        net.heal()

    result = run_scenario(tmp_path, net, nodes, franz_bin,
                          Nemesis("controller-quorum-lost", fault, heal, hold=QUORUM_LOST_HOLD),
                          writers=3, partitions=3, rf=3, min_isr=2, topic=new_topic("quorum"),
                          seconds=int(WARMUP + QUORUM_LOST_HOLD) + 12)
    create["thread"].join(timeout=60)
    # Kafka's answer once the forward to the controller timed out (runnel's bound is
    # 15 s, the client's 20 s).
    assert create.get("before_heal") and create.get("outcome") == "REQUEST_TIMED_OUT", create
    # Acknowledged while no quorum existed and every session had run out: from 12 s
    # into the cut to 2 s before its heal (second i of acks_per_second covers [i, i+1)).
    acks = result["acks_per_second"]
    assert sum(acks[int(WARMUP) + 12:int(WARMUP + QUORUM_LOST_HOLD) - 2]) > 0, acks
    fenced = fenced_nodes(nodes)
    assert not fenced, f"fenced {sorted(fenced)} after the quorum came back"
    # openraft logs a line for every failed heartbeat to each voter it cannot reach (1,609
    # of the quorum leader's 1,622 lines in this test, before the limit); each of its call
    # sites prints at most 4 lines per 30 s, and a line says how many were held back.
    logs = {n.host: n.log_path.read_text() for n in nodes}
    raft_lines = {host: log.count("openraft::") for host, log in logs.items()}
    assert max(raft_lines.values()) < 300, raft_lines
    assert any("repeated openraft log lines held back" in log for log in logs.values())
    name = new_topic("quorum-back")
    admin.create_topics([NewTopic(name, 1, 3)], request_timeout=30)[name].result(timeout=60)
    print(json.dumps({"create_without_quorum": create["outcome"]}))


@pytest.fixture
def tmpfs_cluster3(tmp_path, runnel_bin):
    """Three brokers, each with its data dir (partitions and metadata log) on a tmpfs of
    its own: a disk that a test can fill to the last byte."""
    mounted = []
    try:
        for i in range(3):
            d = tmp_path / f"n{i + 1}"
            d.mkdir()
            out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(d)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs (needs root): {out.stderr.strip()}")
            mounted.append(d)
        yield from start_cluster(tmp_path, runnel_bin, 3)
    finally:
        for d in mounted:
            subprocess.run(["umount", "-l", str(d)], check=False)


def fill_disk(path):
    """Fill the filesystem under `path` to its last byte (a big file, then a small one for
    what is left)."""
    for name, block in (("filler", "1M"), ("filler.small", "1k")):
        subprocess.run(["dd", "if=/dev/zero", f"of={path / name}", f"bs={block}", "status=none"],
                       stderr=subprocess.DEVNULL, check=False)


def test_cluster_leader_disk_full(tmp_path, tmpfs_cluster3, franz_bin):
    """The disk under the leader of partition 0 fills up while acks=all writers run. Its
    appends fail (KAFKA_STORAGE_ERROR, retriable), its log dir goes offline and the
    leadership of its partitions moves to the other in-sync replicas; when its metadata
    log cannot take the next entry either, the node exits, as Kafka stops a broker whose
    metadata log dir failed (KIP-858). Before, it stayed up with its metadata frozen:
    still heartbeating (so never fenced) and telling clients it led partitions that had
    moved, and a writer that asked it went on asking it until it was restarted. With
    room again, it restarts and rejoins; nothing acknowledged is lost."""
    net, nodes = tmpfs_cluster3
    hit, topic = Target(), new_topic("disk-full")
    exits = []

    def heal():
        node = hit.node
        try:
            exits.append(node.proc.wait(timeout=30))
        except subprocess.TimeoutExpired:
            exits.append(None)
            node.kill()
        for name in ("filler", "filler.small"):
            (node.data_dir / name).unlink(missing_ok=True)
        node.start(60)

    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-disk-full", topic,
                     on_leader(net, nodes, franz_bin, topic, hit, lambda leader: fill_disk(leader.data_dir)), heal)
    assert exits and all(code == 1 for code in exits), f"exit codes of the full nodes: {exits}"
    logs = "".join(n.log_path.read_text() for n in nodes)
    assert "the metadata log failed" in logs and "No space left on device" in logs


# Jepsen's usual nemeses beyond the ones above, about a minute each: CI runs none of them
# (its time budget); scripts/faults-soak.sh sets FAULT_NEMESES=all.
soak_only = pytest.mark.skipif(os.environ.get("FAULT_NEMESES") != "all",
                               reason="runs in scripts/faults-soak.sh (FAULT_NEMESES=all; CI time budget)")


@soak_only
def test_cluster_leader_cut_from_one_follower(tmp_path, cluster3, franz_bin):
    """A bridge: the leader of partition 0 loses one other node only, and the third sees
    both. The cut follower (a voter too) cannot fetch, and the quorum's leader may be on
    either side of the cut."""
    net, nodes = cluster3
    hit, topic = Target(), new_topic("bridge")

    def cut(leader):
        net.partition(leader.host, next(n for n in nodes if n is not leader).host)

    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-bridge", topic,
                     on_leader(net, nodes, franz_bin, topic, hit, cut), net.heal)


@soak_only
def test_cluster_controller_leader_isolated(tmp_path, cluster3, franz_bin):
    """The quorum leader cut off from the other nodes (clients still reach it): the
    others elect a new one and fence it; nothing it accepts alone is acknowledged."""
    net, nodes = cluster3
    hit = Target()

    cluster_scenario(tmp_path, net, nodes, franz_bin, "controller-isolated", new_topic("controller"),
                     on_controller(net, nodes, franz_bin, hit, lambda leader: split_off(net, nodes, [leader])),
                     net.heal)


@soak_only
def test_cluster_random_halves(tmp_path, cluster3, franz_bin):
    """Jepsen's random halves, often and briefly: a random node cut off from the others
    for less than a broker session, again and again."""
    net, nodes = cluster3
    rng = seeded_rng()

    def fault():
        split_off(net, nodes, [rng.choice(nodes)])

    cluster_scenario(tmp_path, net, nodes, franz_bin, "random-halves", new_topic("halves"), fault, net.heal,
                     hold=5.0)


@soak_only
def test_cluster_majority_kill(tmp_path, cluster3, franz_bin):
    """SIGKILL two of three nodes (a majority of the voters and of every ISR) and start
    them again: nothing can be acknowledged meanwhile, and nothing acknowledged is lost."""
    net, nodes = cluster3
    rng = seeded_rng()
    killed = []

    def fault():
        killed[:] = rng.sample(nodes, 2)
        for n in killed:
            n.kill()

    def heal():
        for n in killed:
            n.start(60)

    cluster_scenario(tmp_path, net, nodes, franz_bin, "majority-kill", new_topic("majority"), fault, heal)


@soak_only
def test_cluster_whole_cluster_kill(tmp_path, cluster3, franz_bin):
    """SIGKILL every node at once (a power cut without losing the page cache) and start
    them all again, several times."""
    net, nodes = cluster3

    def fault():
        for n in nodes:
            n.kill()

    def heal():
        for n in nodes:
            n.launch()
        for n in nodes:
            n.wait_listening(60)

    cluster_scenario(tmp_path, net, nodes, franz_bin, "whole-cluster-kill", new_topic("all"), fault, heal,
                     hold=3.0)


@soak_only
def test_cluster_leader_disk_replaced(tmp_path, cluster3, franz_bin):
    """SIGKILL the leader of partition 0 and delete its data dir (its disk replaced),
    start it again, and do what an operator does for a controller whose disk was
    replaced: `kafka-metadata-quorum remove-controller` with the old directory id, then
    `add-controller` from the node's config. The node's replicas come back empty: the new
    process is fenced and leaves every ISR until it has caught up, so nothing
    acknowledged is lost; as a voter under a lost log's directory it votes for nobody
    until it is added back."""
    net, nodes = cluster3
    hit, topic = Target(), new_topic("disk")
    lost = {}
    servers = ",".join(n.address for n in nodes)

    def replace_disk(node):
        lost.update(meta_properties(node))
        node.kill()
        shutil.rmtree(node.data_dir)

    def tool(*args):
        proc = run_tool(QUORUM, "--bootstrap-server", servers, *args, timeout=90)
        assert proc.returncode == 0, describe(proc)

    def heal():
        node, node_id = hit.node, int(lost["node.id"])
        node.start(60)
        wait_for("the node registered again",
                 lambda: (node.data_dir / "meta.properties").exists() and "cluster.id" in meta_properties(node))
        new = meta_properties(node)["directory.id"]
        tool("remove-controller", "--controller-id", str(node_id), "--controller-directory-id", lost["directory.id"])
        wait_for("the node an observer under its new directory", lambda: node_id not in voter_ids(servers)
                 and replication_rows(servers)[node_id]["DirectoryId"] == new)
        tool("--command-config", controller_config(net, node, tmp_path), "add-controller")
        wait_for("three voters again", lambda: voter_ids(servers) == [1, 2, 3])

    fault = on_leader(net, nodes, franz_bin, topic, hit, replace_disk)
    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-disk-replaced", topic, fault, heal, hold=3.0)


# Kafka's replication test matrix (tests/kafkatest/tests/core/replication_test.py): each
# failure aimed at the partition leader or at the controller, while idempotent acks=all
# producers write to an RF=3, min.insync.replicas=2 topic. A shutdown stops the broker
# for the rest of the run; a bounce chases the current leader and restarts it, up to
# five times (Kafka's count) as the run's length allows.
MATRIX_SECONDS = int(os.environ.get("FAULT_MATRIX_SECONDS", "30"))
# About a minute per case: CI runs one case per failure and per target (a diagonal);
# scripts/faults-soak.sh sets FAULT_MATRIX=all for all eight.
IN_CI_MATRIX = {("clean_shutdown", "leader"), ("hard_shutdown", "controller"), ("clean_bounce", "controller"),
                ("hard_bounce", "leader")}


class Failure:
    """A nemesis that runs one failure sequence once, after the warm-up."""

    def __init__(self, name, sequence):
        self.name, self.sequence = name, sequence
        self.injected = 0
        self.errors = []
        self._thread = None

    def start(self, warmup, until):
        def run():
            time.sleep(warmup)
            try:
                self.sequence(self, until)
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(e))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def join(self):
        self._thread.join(timeout=180)


@pytest.fixture
def matrix_cluster(tmp_path, runnel_bin):
    """Three runnel nodes, or with FAULT_SYSTEM=kafka three Kafka 4.4 nodes."""
    if SYSTEM == "kafka":
        started = start_kafka(tmp_path, 3)
        net, nodes = next(started)
        try:
            wait_registered(nodes, 3, 120)
            yield net, nodes
        finally:
            started.close()
    else:
        yield from start_cluster(tmp_path, runnel_bin, 3)


@pytest.mark.parametrize("kind", ["leader", "controller"])
@pytest.mark.parametrize("failure", ["clean_shutdown", "hard_shutdown", "clean_bounce", "hard_bounce"])
def test_replication_matrix(tmp_path, matrix_cluster, franz_bin, failure, kind):
    if (failure, kind) not in IN_CI_MATRIX and os.environ.get("FAULT_MATRIX") != "all":
        pytest.skip("the rest of the matrix runs in scripts/faults-soak.sh (FAULT_MATRIX=all; CI time budget)")
    net, nodes = matrix_cluster
    topic = new_topic(f"{failure}-{kind}")

    def sequence(nemesis, until):
        bounces = 1 if failure.endswith("shutdown") else 5
        for _ in range(bounces):
            if time.monotonic() + 8 > until:
                break
            node = broker_of(net, nodes, franz_bin, kind, topic)
            if failure.startswith("clean"):
                node.stop()
            else:
                node.kill()
            nemesis.injected += 1
            if failure.endswith("bounce"):
                node.start(60)

    result = run_scenario(tmp_path, net, nodes, franz_bin, Failure(f"{failure}-{kind}", sequence),
                          writers=3, partitions=3, rf=3, min_isr=2, topic=topic, seconds=MATRIX_SECONDS)
    assert result["acked"] > 5000, result


def test_cluster_group_rides_through_a_coordinator_kill(tmp_path, cluster3, franz_bin):
    """A consumer group (franz-go, classic protocol, two members) consumes an RF=3 topic
    while the broker coordinating it (the leader of the group's partition of
    __consumer_offsets) is SIGKILLed and
    restarted: the group moves to the new leader, every acknowledged record is consumed,
    and the committed offsets survive (a member joining afterwards gets nothing new)."""
    net, nodes = cluster3
    bootstrap = ",".join(n.address for n in nodes)
    topic, group = new_topic("group"), "g-" + uuid.uuid4().hex[:8]
    acks, observed = tmp_path / "acks.jsonl", tmp_path / "observed.jsonl"
    wl = net.run("client", [franz_bin, "workload", "-brokers", bootstrap, "-topic", topic, "-writers", 3,
                            "-partitions", 3, "-rf", 3, "-min-isr", 2, "-duration", "3s", "-rate", 500,
                            "-acks", acks, "-observed", observed], timeout=120, capture_output=True, text=True)
    assert wl.returncode == 0, wl.stderr[-3000:]
    wanted = {f"w{a['w']}-{a['seq']}" for a in map(json.loads, acks.read_text().splitlines()) if not a.get("err")}
    ctl = tmp_path / "ctl"
    ctl.mkdir()

    def member(name):
        out = open(tmp_path / f"{name}.jsonl", "wb")
        return net.popen("client", [franz_bin, "group", "-brokers", bootstrap, "-topic", topic, "-group", group,
                                    "-name", name, "-ctl", ctl], stdout=out, stderr=subprocess.STDOUT)

    def events(name):
        path = tmp_path / f"{name}.jsonl"
        rows = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
        return rows

    def consumed(names):
        return {e["v"] for n in names for e in events(n) if e.get("e") == "rec"}

    members = {n: member(n) for n in ("m1", "m2")}
    try:
        deadline = time.monotonic() + 60
        while len(consumed(members)) < len(wanted) // 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        coordinator = group_coordinator(net, nodes, franz_bin, group)
        coordinator.kill()
        time.sleep(CLUSTER_HOLD)
        coordinator.start(60)
        deadline = time.monotonic() + 90
        while not wanted <= consumed(members) and time.monotonic() < deadline:
            time.sleep(0.5)
        missing = wanted - consumed(members)
        assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
        # Commits go on after the move (to the new coordinator).
        assert any(e.get("e") == "commit" for n in members for e in events(n)[-20:]), events("m1")[-10:]
    finally:
        (ctl / "stop").touch()
        for p in members.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    # Committed offsets survived the coordinator's death: a new member starts at them.
    (ctl / "stop").unlink()
    late = member("m3")
    try:
        deadline = time.monotonic() + 30
        while not any(e.get("e") in ("assigned", "revoked") or "ps" in e for e in events("m3")):
            assert time.monotonic() < deadline, events("m3")
            time.sleep(0.2)
        time.sleep(5)
        assert consumed(["m3"]) == set(), f"a new member re-read {len(consumed(['m3']))} committed records"
    finally:
        (ctl / "stop").touch()
        try:
            late.wait(timeout=60)
        except subprocess.TimeoutExpired:
            late.kill()


def test_cluster_confluent_group_rides_through_a_coordinator_kill(tmp_path, cluster3, franz_bin):
    """confluent-kafka (librdkafka), two members of a classic group, consume an RF=3
    min.insync.replicas=2 topic that an acks=all producer writes to while the broker
    coordinating the group (the leader of its __consumer_offsets partition) is SIGKILLed
    and restarted: every acknowledged record is consumed, the members commit again after
    the move, and the committed offsets survive (read back by a new member)."""
    net, nodes = cluster3
    bootstrap = ",".join(n.address for n in nodes)
    topic, group = new_topic("cgroup"), "cg-" + uuid.uuid4().hex[:8]
    script = str(Path(__file__).resolve().parent / "confluent_group.py")
    out = tmp_path / "confluent"
    out.mkdir()
    client = net.popen("client", [sys.executable, script, "run", bootstrap, topic, group, out, 16],
                       stdout=open(out / "client.log", "wb"), stderr=subprocess.STDOUT)

    def lines(name):
        path = out / name
        rows = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
        return rows

    def consumed():
        return {r["v"] for r in lines("consumed.jsonl")}

    try:
        deadline = time.monotonic() + 60
        while len(consumed()) < 500:
            assert time.monotonic() < deadline and client.poll() is None, (out / "client.log").read_text()[-3000:]
            time.sleep(0.2)
        coordinator = group_coordinator(net, nodes, franz_bin, group)
        coordinator.kill()
        killed_at = time.time()
        time.sleep(CLUSTER_HOLD / 2)
        coordinator.start(60)
        deadline = time.monotonic() + 90
        while not (out / "produced").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        produced = json.loads((out / "produced").read_text())
        assert produced["unflushed"] == 0, produced
        acked = {r["v"] for r in lines("acks.jsonl")}
        assert len(acked) > 1000, produced
        while not acked <= consumed() and time.monotonic() < deadline:
            time.sleep(0.5)
        missing = acked - consumed()
        assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
        commits_after = [e for e in lines("events.jsonl") if e["e"] == "commit" and e["t"] > killed_at + 1]
        assert commits_after, lines("events.jsonl")[-10:]
    finally:
        (out / "stop").touch()
        try:
            client.wait(timeout=90)
        except subprocess.TimeoutExpired:
            client.kill()
    closed = [e for e in lines("events.jsonl") if e["e"] == "closed"]
    assert len(closed) == 2 and not any(e["pending"] for e in closed), lines("events.jsonl")[-10:]
    # Everything was consumed and committed: a new member reads back committed offsets at
    # the end of every partition.
    check = net.run("client", [sys.executable, script, "committed", bootstrap, topic, group],
                    timeout=90, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-3000:]
    positions = json.loads(check.stdout.strip().splitlines()[-1])
    assert len(positions) == 3 and all(c == high and high > 0 for c, high in positions.values()), positions


@soak_only
def test_cluster5_leader_in_minority(tmp_path, cluster5, franz_bin):
    """Five brokers split 2|3, the leader of partition 0 on the side of two: the three
    elect leaders and fence the two; nothing the two accept is acknowledged."""
    net, nodes = cluster5
    topic = new_topic("minority5")
    rng = seeded_rng()

    def fault():
        leader = partition_leader(net, nodes, franz_bin, topic)
        split_off(net, nodes, [leader, rng.choice([n for n in nodes if n is not leader])])

    cluster_scenario(tmp_path, net, nodes, franz_bin, "leader-minority-5", topic, fault, net.heal)


@soak_only
def test_cluster5_controller_in_minority(tmp_path, cluster5, franz_bin):
    """Five brokers split 2|3, the controller quorum leader on the side of two."""
    net, nodes = cluster5
    rng = seeded_rng()

    def fault():
        leader = controller_leader(net, nodes, franz_bin)
        split_off(net, nodes, [leader, rng.choice([n for n in nodes if n is not leader])])

    cluster_scenario(tmp_path, net, nodes, franz_bin, "controller-minority-5", new_topic("cminority5"), fault,
                     net.heal)


@soak_only
def test_cluster5_majorities_ring(tmp_path, cluster5, franz_bin):
    """Jepsen's majorities ring on five brokers: each sees its two neighbours in a random
    ring, so every node is in a majority and no two see the same one."""
    net, nodes = cluster5
    rng = seeded_rng()

    def fault():
        ring = rng.sample(nodes, len(nodes))
        for i, a in enumerate(ring):
            for b in ring[i + 2:]:
                if not (a is ring[0] and b is ring[-1]):
                    net.partition(a.host, b.host)

    cluster_scenario(tmp_path, net, nodes, franz_bin, "majorities-ring-5", new_topic("ring5"), fault, net.heal)
