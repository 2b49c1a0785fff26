"""The web console at `/` in a real browser: Debian's headless Chromium driven through
chromedriver's W3C WebDriver protocol (plain HTTP + JSON, no client library), against a
real runnel process whose data comes from real Kafka clients (confluent-kafka).

It checks the topics page (partitions, watermarks, sizes), the record browser by offset
and by timestamp (a `<script>` value stays text, a binary value is shown as marked
base64), the create-topic and produce forms (confirmed through Kafka clients), a
group's lag per partition, the brokers page, and a three-broker `runnel dev-cluster`
(racks, the controller, leaders, replicas and ISR). A screenshot of each page is kept in
compat-tests/artifacts/web-console/ (git-ignored; the path is printed).
The console's read-only JSON endpoints are checked for bad input here too.
"""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import RunnelProcess, free_dev_cluster_base_port, runnel_bin

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "web-console"
WAIT = 20.0
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">&amp;'
BINARY = bytes([0x00, 0xFF, 0xFE, 0x80, 0x01])
T0 = 1_700_000_000_000

if (not CHROMIUM or not CHROMEDRIVER) and os.environ.get("CI"):
    # In CI setup/chromium.sh installs both; a skip there would hide a broken setup.
    raise RuntimeError("chromium or chromedriver missing (compat-tests/setup/chromium.sh)")
needs_chromium = pytest.mark.skipif(not CHROMIUM or not CHROMEDRIVER,
                                    reason="chromium/chromedriver not installed (setup/chromium.sh)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=30.0):
    """(status, parsed JSON) of one request."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw else None)


class Browser:
    """A chromedriver process and one headless Chromium session, spoken to in WebDriver."""

    def __init__(self, log_path: Path):
        self.port = free_port()
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}"], stdout=self.log, stderr=self.log)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + WAIT
        while True:
            try:
                status, body = http("GET", self.base + "/status", timeout=2)
                if status == 200 and body["value"]["ready"]:
                    break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"chromedriver did not start; see {log_path}")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--no-first-run", "--disable-extensions"]}}}}
        status, body = http("POST", self.base + "/session", caps, timeout=60)
        assert status == 200, body
        self.session = f"{self.base}/session/{body['value']['sessionId']}"

    def cmd(self, method, path, body=None):
        status, resp = http(method, self.session + path, body if body is not None or method != "POST" else {})
        assert status == 200, (method, path, resp)
        return resp["value"]

    def go(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find_all(self, css):
        return [e[ELEMENT] for e in self.cmd("POST", "/elements", {"using": "css selector", "value": css})]

    def find(self, css):
        return self.wait(lambda: (self.find_all(css) or [None])[0], f"an element {css!r}")

    def text(self, css):
        return self.cmd("GET", f"/element/{self.find(css)}/text")

    def click(self, css):
        self.cmd("POST", f"/element/{self.find(css)}/click")

    def type(self, css, text):
        el = self.find(css)
        self.cmd("POST", f"/element/{el}/clear")
        self.cmd("POST", f"/element/{el}/value", {"text": text})

    def select(self, css, value):
        """Chooses `value` in a <select> as a user would (the change event fires)."""
        done = self.js("const s = document.querySelector(arguments[0]);"
                       "if (![...s.options].some(o => o.value === arguments[1])) return false;"
                       "s.value = arguments[1]; s.dispatchEvent(new Event('change')); return true;", css, value)
        assert done, f"{value!r} is not an option of {css}"

    def wait(self, probe, what):
        """The first truthy result of `probe`; fails after WAIT seconds (a hang, not a timing)."""
        deadline = time.time() + WAIT
        while True:
            got = probe()
            if got:
                return got
            if time.time() > deadline:
                raise AssertionError(f"waited {WAIT}s for {what}")
            time.sleep(0.1)

    def loaded(self, hash_):
        """Waits until the console has drawn the page of `hash_`."""
        self.wait(lambda: self.js("return document.getElementById('main').getAttribute('data-loaded')") == hash_,
                  f"page {hash_}")

    def screenshot(self, name):
        path = ARTIFACTS / f"{name}.png"
        path.write_bytes(base64.b64decode(self.cmd("GET", "/screenshot")))
        print(f"screenshot: {path}")

    def close(self):
        try:
            http("DELETE", self.session, timeout=10)
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.log.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    if os.environ.get("COMPAT_BOOTSTRAP"):
        pytest.skip("needs runnel's HTTP listener")
    b = RunnelProcess(tmp_path_factory.mktemp("web-console") / "data")
    b.start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def browser(tmp_path_factory, pytestconfig):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    print(f"web console screenshots: {ARTIFACTS}")
    b = Browser(tmp_path_factory.mktemp("chromedriver") / "chromedriver.log")
    yield b
    b.close()
    # Said past pytest's output capture, so a CI log names where the screenshots are.
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    shots = len(list(ARTIFACTS.glob("*.png")))
    if capture is not None:
        with capture.global_and_fixture_disabled():
            print(f"\nweb console: {shots} screenshot(s) in {ARTIFACTS}")


def row_cells(browser, css):
    """The texts of the cells of the row `css`."""
    return browser.js("return [...document.querySelector(arguments[0]).cells].map(c => c.innerText)", css)


def kafka_create(broker, name, partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce_data(broker, topic):
    """Partition 0: five records at T0, T0+1s, ... including a hostile and a binary value;
    partition 1: two records."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    values = [b"hello", HOSTILE.encode(), BINARY, b"fourth", b"fifth"]
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=f"key-{i}".encode(), partition=0, timestamp=T0 + 1000 * i,
                  headers=[("trace", f"h{i}".encode())])
    for i in range(2):
        p.produce(topic, value=f"p1-{i}".encode(), partition=1)
    assert p.flush(30) == 0


@needs_chromium
def test_console_in_a_browser(broker, browser):
    console = f"http://127.0.0.1:{broker.http_port}/"
    topic = "console-data"
    kafka_create(broker, topic, 3)
    produce_data(broker, topic)

    # A group with a member that stays, committed at offset 2 of partition 0: lag 3.
    group = "console-group"
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "console-test-client",
                       "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        member.subscribe([topic])
        deadline = time.time() + WAIT
        while not member.assignment() and time.time() < deadline:
            member.poll(0.2)
        assert len(member.assignment()) == 3, member.assignment()
        member.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 2)], asynchronous=False)

        # Topics: partitions, watermarks, sizes.
        browser.go(console + "#topics")
        browser.loaded("#topics")
        cells = row_cells(browser, f'#topics-table tr[data-topic="{topic}"][data-partition="0"]')
        assert cells[0] == f"{topic}-0"
        assert cells[1:4] == ["1", "1", "1"], cells  # leader, replicas, ISR on broker 1
        assert cells[4:7] == ["0", "5", "5"], cells  # earliest, latest, records
        assert cells[7].endswith("B") and not cells[7].startswith("0 "), cells  # a size in bytes, not 0
        assert row_cells(browser, f'#topics-table tr[data-topic="{topic}"][data-partition="1"]')[5] == "2"
        assert row_cells(browser, f'#topics-table tr[data-topic="{topic}"][data-partition="2"]')[5] == "0"
        browser.screenshot("01-topics")

        # Records by offset: key, value, headers; hostile text stays text; binary is marked.
        browser.go(console + f"#records?topic={topic}&partition=0&offset=0")
        browser.loaded(f"#records?topic={topic}&partition=0&offset=0")
        offsets = browser.js("return [...document.querySelectorAll('#records-table tbody tr')].map(r => r.dataset.offset)")
        assert offsets == ["0", "1", "2", "3", "4"]
        first = row_cells(browser, '#records-table tr[data-offset="0"]')
        assert first[2:5] == ["key-0", "hello", "trace: h0"], first
        assert first[1] == "2023-11-14T22:13:20.000Z", first  # T0
        hostile = row_cells(browser, '#records-table tr[data-offset="1"]')
        assert hostile[3] == HOSTILE, hostile
        assert browser.js("return window.__pwned === undefined")
        assert browser.js("return document.querySelectorAll('#records-table script, #records-table img').length") == 0
        binary = row_cells(browser, '#records-table tr[data-offset="2"]')
        assert binary[3] == base64.b64encode(BINARY).decode() + "base64", binary  # the value, then its badge
        assert binary[2] == base64.b64encode(b"key-2").decode() + "base64", binary
        assert len(browser.find_all('#records-table tr[data-offset="2"] td.value .b64')) == 1
        assert not browser.find_all('#records-table tr[data-offset="0"] .b64')
        browser.screenshot("02-records-by-offset")

        # Records by timestamp, through the form: T0 + 3 s is offset 3.
        browser.select("#records-mode", "timestamp")
        browser.type("#records-from", str(T0 + 2500))
        browser.click("#records-go")
        want = f"#records?topic={topic}&partition=0&limit=50&timestamp={T0 + 2500}"
        browser.loaded(want)
        offsets = browser.js("return [...document.querySelectorAll('#records-table tbody tr')].map(r => r.dataset.offset)")
        assert offsets == ["3", "4"]
        browser.screenshot("03-records-by-timestamp")

        # Create a topic through the form; the Kafka protocol sees it.
        made = "console-made"
        browser.go(console + "#create-topic")
        browser.loaded("#create-topic")
        browser.type("#create-name", made)
        browser.type("#create-partitions", "2")
        browser.type("#create-configs", "retention.ms=3600000")
        browser.click("#create-submit")
        assert "Created topic console-made with 2 partition(s)" in browser.text("#create-ok")
        browser.screenshot("04-create-topic")
        meta = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(made, timeout=10)
        assert len(meta.topics[made].partitions) == 2
        # A second time: the form shows the broker's refusal.
        browser.click("#create-submit")
        assert "topic_already_exists" in browser.text("#create-error")

        # Produce through the form; a Kafka consumer reads the record.
        browser.go(console + f"#produce?topic={made}")
        browser.loaded(f"#produce?topic={made}")
        browser.type("#produce-partition", "1")
        browser.type("#produce-key", "form-key")
        browser.type("#produce-value", "from the form")
        browser.type("#produce-headers", "source=console")
        browser.click("#produce-submit")
        assert browser.text("#produce-ok") == f"Produced to {made}-1 at offset 0"
        browser.screenshot("05-produce")
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "console-check",
                           "enable.auto.commit": False})
        try:
            reader.assign([TopicPartition(made, 1, 0)])
            msg = browser.wait(lambda: reader.poll(0.5), "the record produced through the form")
            assert msg.error() is None, msg.error()
            assert (msg.key(), msg.value(), msg.headers()) == (b"form-key", b"from the form", [("source", b"console")])
        finally:
            reader.close()

        # Groups: the group, its member, and lag per partition.
        browser.go(console + "#groups")
        browser.loaded("#groups")
        assert row_cells(browser, f'#groups-table tr[data-group="{group}"]')[:2] == [group, "Stable"]
        browser.screenshot("06-groups")
        browser.click(f'#groups-table tr[data-group="{group}"] a')
        browser.loaded(f"#group?id={group}")
        members = browser.js("return [...document.querySelectorAll('#members-table tbody tr')].map(r => r.cells[1].innerText)")
        assert members == ["console-test-client"]
        p0 = row_cells(browser, f'#lag-table tr[data-topic="{topic}"][data-partition="0"]')
        assert p0[3:6] == ["2", "5", "3"], p0  # committed, latest, lag
        p1 = row_cells(browser, f'#lag-table tr[data-topic="{topic}"][data-partition="1"]')
        assert p1[3:6] == ["2", "2", "0"], p1
        p2 = row_cells(browser, f'#lag-table tr[data-topic="{topic}"][data-partition="2"]')
        assert p2[3] == "–" and p2[4] == "0", p2  # nothing committed: no lag to show
        assert "total lag 3" in browser.text("#group-summary")
        browser.screenshot("07-group-lag")

        # Brokers: this one, its address, the controller.
        browser.go(console + "#brokers")
        browser.loaded("#brokers")
        b1 = row_cells(browser, '#brokers-table tr[data-node="1"]')
        assert b1[1] == broker.bootstrap, b1
        assert "controller" in b1[3] and "this broker" in b1[3], b1
        browser.screenshot("08-brokers")
    finally:
        member.close()


def test_console_endpoints_refuse_bad_input(broker):
    base = f"http://127.0.0.1:{broker.http_port}"
    topic = "console-bad-input"
    kafka_create(broker, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, value=b"v", partition=0)
    assert p.flush(30) == 0

    def refused(path, status, field):
        got, body = http("GET", base + path)
        assert (got, body["field"]) == (status, field), (path, body)

    records = f"/topics/{topic}/partitions/0/records"
    refused(records + "?offset=abc", 400, "offset")
    refused(records + "?offset=-1", 400, "offset")
    refused(records + "?limit=0", 400, "limit")
    refused(records + "?limit=501", 400, "limit")
    refused(records + "?offset=0&timestamp=5", 400, "timestamp")
    refused(records + "?offest=0", 400, "offest")
    refused(records + "?offset=2", 416, "offset")
    refused(f"/topics/{topic}/partitions/x/records", 400, "partition")
    refused(f"/topics/{topic}/partitions/7/records", 404, "partition")
    refused("/topics/no-such-topic/partitions/0/records", 404, "topic")
    refused("/consumer-groups/no-such-group", 404, "group")

    status, page = http("GET", base + records + "?offset=1")
    assert status == 200 and page["records"] == [] and page["next_offset"] == 1
    status, page = http("GET", base + records + f"?timestamp={2**62}")
    assert status == 200 and page["records"] == [] and page["start_offset"] == 1

    # The page and its assets are served with a policy that allows this listener's scripts only.
    with urllib.request.urlopen(base + "/", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/html")
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        assert b"/console/console.js" in r.read()
    status, doc = http("GET", base + "/openapi.json")
    assert status == 200 and "get" in doc["paths"]["/topics/{topic}/partitions/{n}/records"]


@needs_chromium
def test_console_shows_a_cluster(tmp_path, browser):
    """Three brokers in racks (`runnel dev-cluster`): the brokers page names the racks and
    the one active controller; the topics page shows each partition's leader, replicas
    and ISR, with watermarks where the console's broker leads."""
    if os.environ.get("COMPAT_BOOTSTRAP"):
        pytest.skip("starts its own brokers")
    base = free_dev_cluster_base_port()
    parent = subprocess.Popen([runnel_bin(), "dev-cluster", "--nodes", "3", "--base-port", str(base),
                               "--data-root", str(tmp_path / "data"), "--", "--rack", "rack-{node}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        bootstrap = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and bootstrap is None:
            line = parent.stdout.readline()
            if not line:
                break
            if "bootstrap servers:" in line:
                bootstrap = line.split("bootstrap servers:")[1].strip()
        assert bootstrap, "the dev cluster did not start"
        http1 = f"http://127.0.0.1:{base + 200}"
        topic = "replicated-console"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(3):
            p.produce(topic, value=f"v{i}".encode(), partition=i)
        assert p.flush(30) == 0
        del p, admin  # before the brokers stop, so they do not log reconnects

        def full_isr():
            status, body = http("GET", http1 + "/topics")
            t = [t for t in body["topics"] if t["name"] == topic] if status == 200 else []
            return t and all(len(p["isr"]) == 3 for p in t[0]["partitions"]) and t[0]
        t = browser.wait(full_isr, "every partition's ISR to hold three replicas")

        browser.go(http1 + "/#brokers")
        browser.loaded("#brokers")
        rows = [row_cells(browser, f'#brokers-table tr[data-node="{n}"]') for n in (1, 2, 3)]
        assert [r[1] for r in rows] == [f"127.0.0.1:{base + i}" for i in range(3)], rows
        assert [r[2] for r in rows] == ["rack-1", "rack-2", "rack-3"], rows
        assert sum("controller" in r[3] for r in rows) == 1, rows
        assert "this broker" in rows[0][3], rows
        browser.screenshot("09-cluster-brokers")

        browser.go(http1 + "/#topics")
        browser.loaded("#topics")
        for part in t["partitions"]:
            cells = row_cells(browser, f'#topics-table tr[data-topic="{topic}"][data-partition="{part["partition"]}"]')
            assert cells[1] == str(part["leader"]), cells
            assert cells[2] == ", ".join(map(str, part["replicas"])), cells
            assert sorted(cells[3].split(", ")) == ["1", "2", "3"], cells
            # Watermarks where broker 1 leads; every broker holds a replica, so a size.
            assert cells[5] == ("1" if part["leader"] == 1 else "–"), cells
            assert cells[7].endswith("B"), cells
        browser.screenshot("10-cluster-topics")
    finally:
        parent.send_signal(signal.SIGINT)
        try:
            parent.wait(30)
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.wait(10)
