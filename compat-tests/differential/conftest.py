"""Fixtures for the differential suite: the same scenario against runnel and Apache Kafka.

Every test takes `broker` ("kafka" or "runnel", parametrised) and `bootstrap`; it states
Kafka 4.4's behaviour as the expectation, so the Kafka run checks that the expectation is
right and the runnel run checks runnel against it. Tests that compare the two directly take
`both`.

* runnel: one process per session (conftest's RunnelProcess, $RUNNEL_BIN or
  target/debug/runnel). COMPAT_BOOTSTRAP is ignored here: this suite always needs both.
* Kafka: compat-tests/reference-kafka.sh on 127.0.0.1:$DIFFERENTIAL_KAFKA_PORT (19092).
  Started when not running and stopped at the end only if this session started it. When it
  cannot run (no jars, no Java, DIFFERENTIAL_KAFKA=0) the Kafka side is skipped.

A test marked `@runnel_differs("reason")` expects runnel to fail it (strict xfail on the
runnel side only): a known difference the lead has not fixed yet. It flips to XPASS (a
failure) once runnel matches Kafka, and the marker should then be removed.
"""
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import RunnelProcess  # compat-tests/conftest.py

from . import kwire

HERE = Path(__file__).resolve().parent
REF_SCRIPT = HERE.parent / "reference-kafka.sh"
KAFKA_PORT = os.environ.get("DIFFERENTIAL_KAFKA_PORT", "19092")
BROKERS = ("kafka", "runnel")


def pytest_configure(config):
    # kafka-python's schema loader uses importlib.resources.read_text
    config.addinivalue_line("filterwarnings", "ignore:.*is deprecated. Use files:DeprecationWarning")
    config.addinivalue_line("markers", "runnel_differs(reason): known runnel/Kafka difference (strict xfail on runnel)")


def runnel_differs(reason):
    return pytest.mark.runnel_differs(reason=reason)


def pytest_generate_tests(metafunc):
    if "broker" in metafunc.fixturenames:
        metafunc.parametrize("broker", BROKERS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        mark = item.get_closest_marker("runnel_differs")
        if mark is None:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("broker") == "runnel" or "broker" not in callspec.params:
            item.add_marker(pytest.mark.xfail(strict=True, reason=mark.kwargs.get("reason", "")))


def _ref(cmd, timeout):
    return subprocess.run([str(REF_SCRIPT), cmd, KAFKA_PORT], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """Bootstrap of the reference Kafka broker, or a skip reason (str prefixed "SKIP:")."""
    if os.environ.get("DIFFERENTIAL_KAFKA", "1") == "0":
        yield "SKIP: DIFFERENTIAL_KAFKA=0"
        return
    status = _ref("status", 30)
    if status.returncode == 0:
        yield status.stdout.strip()
        return
    try:
        started = _ref("start", 600)
    except (OSError, subprocess.TimeoutExpired) as e:
        yield f"SKIP: reference Kafka could not start: {e}"
        return
    if started.returncode != 0:
        last = (started.stderr.strip().splitlines() or ["?"])[-1]
        yield f"SKIP: reference Kafka unavailable: {last}"
        return
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        _ref("stop", 60)


@pytest.fixture(scope="session")
def runnel_bootstrap(tmp_path_factory):
    proc = RunnelProcess(tmp_path_factory.mktemp("differential") / "data")
    proc.start()
    try:
        yield proc.bootstrap
    finally:
        proc.kill()


def _kafka_unavailable(reason):
    # In CI the Kafka jars are installed by compat-tests/run.sh: a reference broker that
    # does not start is a failure there, not a reason to skip half of the comparison.
    if os.environ.get("CI") == "true" and os.environ.get("DIFFERENTIAL_KAFKA", "1") != "0":
        pytest.fail(f"reference Kafka is required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def bootstrap(broker, request):
    if broker == "kafka":
        b = request.getfixturevalue("kafka_bootstrap")
        if b.startswith("SKIP:"):
            _kafka_unavailable(b[5:].strip())
        return b
    return request.getfixturevalue("runnel_bootstrap")


@pytest.fixture
def both(request):
    """{"kafka": bootstrap, "runnel": bootstrap}; skips when Kafka is unavailable."""
    k = request.getfixturevalue("kafka_bootstrap")
    if k.startswith("SKIP:"):
        _kafka_unavailable(k[5:].strip())
    return {"kafka": k, "runnel": request.getfixturevalue("runnel_bootstrap")}


@pytest.fixture
def topic():
    return f"d-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def conn(bootstrap):
    with kwire.Conn(bootstrap) as c:
        yield c
