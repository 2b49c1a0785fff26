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
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

import netns
from checker import check, read_lines
from cluster_fixtures import franz_bin, runnel_bin  # noqa: F401 (pytest fixtures)

SECONDS = int(os.environ.get("FAULT_SECONDS", "20"))
# Records per second per writer: enough for thousands of acknowledged records per
# scenario, few enough that the read-back and the checker take seconds.
RATE = int(os.environ.get("FAULT_RATE", "2000"))

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
                 topic=None):
    topic = topic or new_topic(nemesis.name)
    acks, observed = tmp_path / "acks.jsonl", tmp_path / "observed.jsonl"
    bootstrap = ",".join(n.address for n in nodes)
    err = open(tmp_path / "workload.err", "wb")
    started = time.monotonic()
    workload = net.popen("client", [franz, "workload", "-brokers", bootstrap, "-topic", topic,
                                    "-writers", writers, "-partitions", partitions, "-rf", rf,
                                    "-min-isr", min_isr, "-duration", f"{SECONDS}s", "-rate", RATE,
                                    "-acks", acks, "-observed", observed],
                         stdout=subprocess.PIPE, stderr=err)
    nemesis.start(warmup=3.0, until=started + SECONDS - 3.0)
    try:
        out, _ = workload.communicate(timeout=SECONDS + 180)
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
        "scenario": nemesis.name, "brokers": len(nodes), "rf": rf, "seconds": SECONDS,
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

CONTROLLER_PORT = 9093
# Long enough for the controller to fence a dead broker (broker.session.timeout.ms, 9 s)
# and for the partition to get a new leader before the fault heals.
CLUSTER_HOLD = float(os.environ.get("FAULT_CLUSTER_HOLD", "12"))


def supports_cluster(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return "--controller-quorum-voters" in out.stdout


def start_cluster(tmp_path, runnel_bin, size):
    """`size` brokers, every one a broker and a controller quorum voter."""
    if not supports_cluster(runnel_bin):
        pytest.skip("this runnel has no --controller-quorum-voters (no controller quorum yet)")
    hosts = [f"n{i + 1}" for i in range(size)]
    net = netns.Network(hosts + ["client"]).up()
    voters = ",".join(f"{i + 1}@{net.ips[h]}:{CONTROLLER_PORT}" for i, h in enumerate(hosts))
    nodes = [netns.Node(net, h, runnel_bin, tmp_path / h,
                        extra_args=["--node-id", i + 1,
                                    "--controller-listen", f"{net.ips[h]}:{CONTROLLER_PORT}",
                                    "--controller-quorum-voters", voters])
             for i, h in enumerate(hosts)]
    try:
        for n in nodes:
            n.launch()
        for n in nodes:
            n.wait_listening(60)
        yield net, nodes
    finally:
        for n in nodes:
            n.stop()
        net.down()


@pytest.fixture
def cluster3(tmp_path, runnel_bin):
    yield from start_cluster(tmp_path, runnel_bin, 3)


@pytest.fixture
def cluster5(tmp_path, runnel_bin):
    yield from start_cluster(tmp_path, runnel_bin, 5)


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
    rng = random.Random(int(os.environ.get("FAULT_SEED", "7")))

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

    def cut_off(leader):
        for other in nodes:
            if other is not leader:
                net.partition(leader.host, other.host)

    fault = on_leader(net, nodes, franz_bin, topic, hit, cut_off)
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


def test_cluster_group_rides_through_a_coordinator_kill(tmp_path, cluster3, franz_bin):
    """A consumer group (franz-go, classic protocol, two members) consumes an RF=3 topic
    while the broker coordinating it (the leader of __consumer_offsets) is SIGKILLed and
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
        coordinator = partition_leader(net, nodes, franz_bin, "__consumer_offsets")
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
