"""Consumer groups with the Java client (Kafka 4.4 kafka-clients, classic protocol).

compat-tests/groups/GroupConsumer.java is compiled once per session with javac against
the Kafka jars; each member is its own JVM so that one can be SIGKILLed. The scenario is
groups/harness.py's kill_scenario: 3 members on 6 partitions, exactly-once delivery per
assignment, takeover after the session timeout, at-least-once with duplicates only after
the victim's last commit. Run with the eager RangeAssignor and with the incremental
CooperativeStickyAssignor.
"""
import subprocess
import uuid

import pytest

from groups.harness import HERE as GROUPS, Member, kill_scenario
from kafka_tools import JVM_OPTS, LOG4J2_CONFIG, QUICK_START_OPTS, classpath

SESSION_MS = 6000


@pytest.fixture(scope="session")
def java_consumer(tmp_path_factory):
    """The classpath that runs GroupConsumer (compiled into a session temp dir)."""
    out = tmp_path_factory.mktemp("java-groups")
    proc = subprocess.run(["javac", "-d", str(out), "-cp", classpath(),
                           str(GROUPS / "GroupConsumer.java")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return f"{out}:{classpath()}"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_java_group_kill_member(runnel, topic_name, tmp_path, java_consumer, strategy):
    group = f"g-java-{uuid.uuid4().hex[:8]}"
    ctl = tmp_path / "ctl"

    def spawn(name):
        return Member(name, ["java", *JVM_OPTS, *QUICK_START_OPTS, "-Xmx256m",
                             "-cp", java_consumer,
                             f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}", "GroupConsumer",
                             runnel.bootstrap, topic_name, group, name, strategy,
                             SESSION_MS, ctl], tmp_path)

    kill_scenario(runnel.bootstrap, topic_name, group, ctl, spawn, SESSION_MS)
