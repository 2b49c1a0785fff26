"""Hosts on one machine for fault tests: a network namespace per broker and one for the
clients, joined by a bridge; iptables in the namespaces cuts links; signals crash and
pause brokers.

Namespaces are named after the creating process's pid and a random id
(`rnl<pid>-<id>-n1`); the bridge (`rb<id>`) and host-side veths (`v<id><host>`) after the
id alone (interface names have 15 characters). Concurrent runs and several networks in
one process do not collide, and whatever a dead run left is removed by the next one
(`Network.sweep`). Needs root, iproute2 and iptables.
"""
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

PREFIX = "rnl"


def sh(*args, check=True, ns=None, capture=False):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout if capture else p.returncode


def available():
    """Why fault tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            return f"{tool} is not installed (scripts install it with apt-get)"
    return None


def die_with_parent():
    """A Popen preexec_fn: the child gets SIGKILL when the thread that started it ends
    (prctl PR_SET_PDEATHSIG, kept across exec), so a harness that dies or is killed never
    leaves brokers running. Start such children from the main thread."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Network:
    def __init__(self, hosts):
        """`hosts`: names such as ["n1", "n2", "n3", "client"]."""
        self.id = f"{random.randrange(16 ** 6):06x}"
        self.tag = f"{PREFIX}{os.getpid()}-{self.id}"
        self.bridge = f"rb{self.id}"
        self.subnet = self._free_subnet()
        self.hosts = list(hosts)
        self.ips = {h: f"{self.subnet}.{10 + i}" for i, h in enumerate(self.hosts)}
        self.cut = set()

    @staticmethod
    def _free_subnet():
        used = sh("ip", "-4", "-o", "addr", capture=True)
        for _ in range(100):
            s = f"10.231.{random.randint(1, 250)}"
            if f" {s}." not in used:
                return s
        raise RuntimeError("no free 10.231.x.0/24 subnet")

    def ns(self, host):
        return f"{self.tag}-{host}"

    def veth(self, host):
        return f"v{self.id}{host[:3]}"[:15]

    @staticmethod
    def sweep():
        """Remove namespaces and bridges left by runs whose process is gone."""
        for line in sh("ip", "netns", "list", capture=True).splitlines():
            name = line.split()[0] if line.strip() else ""
            if name.startswith(PREFIX) and "-" in name:
                pid = name[len(PREFIX):].split("-")[0]
                if pid.isdigit() and not pid_alive(int(pid)):
                    sh("ip", "netns", "del", name, check=False)
        # A bridge of ours with nothing attached belongs to a network that is gone.
        for line in sh("ip", "-o", "link", "show", "type", "bridge", capture=True).splitlines():
            name = line.split(":")[1].strip()
            if name.startswith("rb") and len(name) == 8 and not sh("ip", "-o", "link", "show", "master", name,
                                                                   capture=True, check=False).strip():
                sh("ip", "link", "del", name, check=False)
                sh("iptables", "-D", "FORWARD", "-i", name, "-j", "ACCEPT", check=False)

    def up(self):
        try:
            return self._up()
        except Exception:
            self.down()
            raise

    def _up(self):
        self.sweep()
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        # dockerd sets the FORWARD policy to DROP; with br_netfilter loaded that would
        # drop traffic between our namespaces too.
        sh("iptables", "-I", "FORWARD", "-i", self.bridge, "-j", "ACCEPT", check=False)
        for h in self.hosts:
            ns, veth = self.ns(h), self.veth(h)
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", veth, "master", self.bridge, "up")
            sh("ip", "addr", "add", f"{self.ips[h]}/24", "dev", "eth0", ns=ns)
            sh("ip", "link", "set", "eth0", "up", ns=ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        return self

    def down(self):
        for h in self.hosts:
            sh("ip", "netns", "del", self.ns(h), check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        sh("iptables", "-D", "FORWARD", "-i", self.bridge, "-j", "ACCEPT", check=False)

    def partition(self, a, b):
        """Drop every packet between hosts a and b (both directions, both ends)."""
        for x, y in ((a, b), (b, a)):
            sh("iptables", "-A", "INPUT", "-s", self.ips[y], "-j", "DROP", ns=self.ns(x))
            sh("iptables", "-A", "OUTPUT", "-d", self.ips[y], "-j", "DROP", ns=self.ns(x))
        self.cut.add(frozenset((a, b)))

    def heal(self):
        for h in self.hosts:
            sh("iptables", "-F", ns=self.ns(h), check=False)
        self.cut.clear()

    def popen(self, host, args, **kw):
        """A process in host's namespace. `ip netns exec` execs the command, so the
        returned Popen's pid is the command's own pid (signals reach it directly)."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns(host)] + [str(a) for a in args], **kw)

    def run(self, host, args, timeout, **kw):
        return subprocess.run(["ip", "netns", "exec", self.ns(host)] + [str(a) for a in args],
                              timeout=timeout, **kw)


class Node:
    """One runnel broker process in its namespace."""

    def __init__(self, net, host, binary, data_dir, port=9092, extra_args=(), die_with_parent=False):
        self.net, self.host, self.binary = net, host, binary
        self.data_dir = Path(data_dir)
        self.port = port
        self.extra_args = list(extra_args)
        self.proc = None
        self.log_path = self.data_dir.parent / f"{host}.log"
        self.starts = 0
        self.die_with_parent = die_with_parent

    @property
    def address(self):
        return f"{self.net.ips[self.host]}:{self.port}"

    def start(self, timeout=30.0):
        return self.launch().wait_listening(timeout)

    def launch(self):
        log = open(self.log_path, "ab")
        args = [self.binary, "--listen", self.address, "--data-dir", self.data_dir] + self.extra_args
        kw = {"preexec_fn": die_with_parent} if self.die_with_parent else {}
        self.proc = self.net.popen(self.host, args, stdout=log, stderr=subprocess.STDOUT, **kw)
        self.starts += 1
        return self

    def wait_listening(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.host} exited with {self.proc.returncode}; {self.log_hint()}")
            try:
                # From the root namespace, over the bridge.
                with socket.create_connection((self.net.ips[self.host], self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.host} not listening after {timeout}s; {self.log_hint()}")

    def log_hint(self):
        return f"see {self.log_path}"

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self):
        self.signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait(timeout=10)

    def stop(self, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def pause(self):
        self.signal(signal.SIGSTOP)

    def resume(self):
        self.signal(signal.SIGCONT)
