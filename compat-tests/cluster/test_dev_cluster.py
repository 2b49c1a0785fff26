"""`runnel dev-cluster`: three brokers as child processes on loopback, replicating an
RF=3 topic that franz-go writes with acks=all; every replica's log is byte-identical and
the checker finds every acknowledged record exactly once. Ctrl-C (SIGINT to the parent)
stops every node."""
import hashlib
import json
import os
import signal
import subprocess
import time

import pytest

from checker import check_files
from cluster_fixtures import franz_bin, runnel_bin  # noqa: F401 (pytest fixtures)
from conftest import free_dev_cluster_base_port


pytestmark = pytest.mark.skipif(bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason="starts its own brokers")


def test_dev_cluster_replicates_and_stops_on_ctrl_c(tmp_path, franz_bin, runnel_bin):
    binary = runnel_bin
    franz_path = franz_bin
    base = free_dev_cluster_base_port()
    parent = subprocess.Popen([binary, "dev-cluster", "--nodes", "3", "--base-port", str(base),
                               "--data-root", str(tmp_path / "data")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        bootstrap = None
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline and bootstrap is None:
            line = parent.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "bootstrap servers:" in line:
                bootstrap = line.split("bootstrap servers:")[1].strip()
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3)), lines

        acks, observed = tmp_path / "acks.jsonl", tmp_path / "observed.jsonl"
        out = subprocess.run([franz_path, "workload", "-brokers", bootstrap, "-topic", "replicated",
                              "-writers", "3", "-partitions", "3", "-rf", "3", "-min-isr", "2",
                              "-duration", "4s", "-rate", "1000", "-acks", acks, "-observed", observed],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        final = subprocess.run([franz_path, "readall", "-brokers", bootstrap, "-topic", "replicated"],
                               capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr[-3000:]
        (tmp_path / "final.jsonl").write_text(final.stdout)
        report = check_files(acks, observed, tmp_path / "final.jsonl")
        assert report.acked > 1000 and report.ok(), json.dumps(report.anomalies())[:3000]

        # Every replica is in sync (a follower that fell behind is let back in by its
        # leader's AlterPartition), and leadership is spread over the three brokers.
        deadline = time.monotonic() + 30
        while True:
            leaders = subprocess.run([franz_path, "leaders", "-brokers", bootstrap, "-topic", "replicated"],
                                     capture_output=True, text=True, timeout=30)
            rows = [json.loads(x) for x in leaders.stdout.splitlines()]
            if all(sorted(r["isr"]) == [1, 2, 3] for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert all(sorted(r["isr"]) == [1, 2, 3] for r in rows), rows
        assert sorted(r["leader"] for r in rows) == [1, 2, 3], rows

        # Followers fetch continuously; give them a moment to hold the last batches too.
        def digests(p):
            return {hashlib.sha256((tmp_path / "data" / f"node-{n}" / f"replicated-{p}" /
                                    "00000000000000000000.log").read_bytes()).hexdigest() for n in (1, 2, 3)}
        for p in range(3):
            deadline = time.monotonic() + 20
            while len(digests(p)) != 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(digests(p)) == 1, f"replicas of partition {p} differ"
    finally:
        parent.send_signal(signal.SIGINT)
        try:
            parent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            parent.kill()
            raise
    assert parent.returncode == 0
    left = subprocess.run(["pgrep", "-f", f"--data-dir {tmp_path}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"nodes still running: {left.stdout}"
