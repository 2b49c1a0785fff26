"""Shared fixtures for the compatibility suite.

Every test talks to a broker through real clients. By default the broker is a fresh
runnel process (target/debug/runnel, or $RUNNEL_BIN) on an ephemeral loopback port with
its own temporary data directory. Set COMPAT_BOOTSTRAP=host:port to aim the suite at an
already running broker instead (for example the Apache Kafka reference broker); tests
that must kill or restart the broker are skipped then.
"""
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from ports import free_dev_cluster_base_port  # noqa: F401  (re-exported to the tests)

REPO = Path(__file__).resolve().parent.parent
READY = re.compile(r"listening on (\S+):(\d+)")
HTTP = re.compile(r"runnel http: serving on (\S+):(\d+)")


def runnel_bin() -> str:
    path = os.environ.get("RUNNEL_BIN", str(REPO / "target" / "debug" / "runnel"))
    if not Path(path).exists():
        pytest.fail(f"runnel binary not found at {path}; run `cargo build` first")
    return path


class RunnelProcess:
    """A runnel broker running as a child process."""

    def __init__(self, data_dir: Path, extra_args=(), env=None):
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args)
        self.env = dict(os.environ, **(env or {}))
        self.port = 0
        self.http_port = None
        self.host = "127.0.0.1"
        self.proc = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.external = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0):
        # The HTTP listener on a free port too (its default, 9644, is one per host); the
        # bound address is printed after the ready line.
        args = [runnel_bin(), "--listen", f"127.0.0.1:{self.port}", "--http-listen", "127.0.0.1:0",
                "--data-dir", str(self.data_dir)] + self.extra_args
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=self.env)
        found = {}

        def pump():
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace")
                log.write(raw)
                log.flush()
                m = READY.search(line)
                if m and "port" not in found:
                    found["port"] = int(m.group(2))
                h = HTTP.search(line)
                if h:
                    self.http_port = int(h.group(2))

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "port" in found:
                self.port = found["port"]
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"runnel did not become ready; see {self.log_path}:\n"
                           + self.log_path.read_text(errors="replace")[-4000:])

    def kill(self):
        """kill -9: no shutdown hooks, no flush."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        """Graceful stop (SIGTERM)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self):
        """Stop gracefully and start again on the same port and data dir."""
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class ExternalBroker:
    external = True

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.host, port = bootstrap.rsplit(":", 1)
        self.port = int(port)

    def kill(self):
        pytest.skip("external broker: cannot kill")

    stop = restart = start = kill

    def log_text(self) -> str:
        return ""


@pytest.fixture
def runnel(tmp_path):
    """A fresh broker for one test; `.bootstrap` is "host:port"."""
    ext = os.environ.get("COMPAT_BOOTSTRAP")
    if ext:
        yield ExternalBroker(ext)
        return
    broker = RunnelProcess(tmp_path / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture(scope="session")
def shared_runnel(tmp_path_factory):
    """One broker shared by the tests of a session that do not kill it."""
    ext = os.environ.get("COMPAT_BOOTSTRAP")
    if ext:
        yield ExternalBroker(ext)
        return
    broker = RunnelProcess(tmp_path_factory.mktemp("shared") / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def topic_name():
    """A topic name unique to this test."""
    return f"t-{uuid.uuid4().hex[:12]}"
