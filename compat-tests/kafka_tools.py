"""Apache Kafka's own CLI tools, run from the jars that setup/kafka.sh caches.

`run_tool(TOPICS, "--bootstrap-server", b, "--list")` is what `kafka-topics.sh
--bootstrap-server b --list` runs in a Kafka 4.4 distribution: the same main class on the
same classpath, with a log4j2 config that keeps the tool's stdout clean (warnings and
errors go to stderr).
"""
import os
import subprocess
from pathlib import Path

KAFKA_VERSION = "4.4.0"

HERE = Path(__file__).resolve().parent
SETUP_SCRIPT = HERE / "setup" / "kafka.sh"
LOG4J2_CONFIG = HERE / "kafka" / "log4j2-tools.xml"

# Main classes behind the bin/*.sh scripts of Kafka 4.4.
TOPICS = "org.apache.kafka.tools.TopicCommand"                       # kafka-topics.sh
CONFIGS = "org.apache.kafka.tools.ConfigCommand"                     # kafka-configs.sh
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"          # kafka-console-producer.sh
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer" # kafka-console-consumer.sh
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"                # kafka-get-offsets.sh
PRODUCER_PERF_TEST = "org.apache.kafka.tools.ProducerPerformance"    # kafka-producer-perf-test.sh
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh
STORAGE = "kafka.tools.StorageTool"                                  # kafka-storage.sh
BROKER = "kafka.Kafka"                                               # kafka-server-start.sh

# Short-lived tools start faster with the serial collector, a small heap and only the C1
# compiler (about 1.0 s instead of 1.7 s per run on two cores). ProducerPerformance keeps
# the full JIT: it measures throughput.
JVM_OPTS = ["-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
QUICK_START_OPTS = ["-XX:TieredStopAtLevel=1"]


def cache_dir() -> Path:
    return Path(os.environ.get("RUNNEL_CACHE", Path.home() / ".cache" / "runnel"))


def libs_dir() -> Path:
    return cache_dir() / f"kafka-{KAFKA_VERSION}" / "libs"


def ensure_jars() -> Path:
    """The libs directory, fetched by setup/kafka.sh first if the cache is incomplete."""
    libs = libs_dir()
    if not (libs.parent / ".complete").exists():
        subprocess.run(["bash", str(SETUP_SCRIPT)], check=True, stdout=subprocess.DEVNULL)
    return libs


def classpath() -> str:
    """A java -cp value naming every jar of the Kafka distribution."""
    return str(ensure_jars() / "*")


def tool_command(main_class: str, *args: str) -> list:
    quick = QUICK_START_OPTS if main_class != PRODUCER_PERF_TEST else []
    return (["java", *JVM_OPTS, *quick, "-cp", classpath(),
             f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}", main_class]
            + [str(a) for a in args])


def run_tool(main_class: str, *args, timeout: float = 120, input: str = None,
             check: bool = False) -> subprocess.CompletedProcess:
    """Runs one Kafka tool to completion; stdout and stderr are captured as text.

    With check=True a non-zero exit raises AssertionError showing both streams, which
    reads better in a pytest report than CalledProcessError.
    """
    proc = subprocess.run(tool_command(main_class, *args), input=input, text=True,
                          capture_output=True, timeout=timeout,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(describe(proc))
    return proc


def describe(proc: subprocess.CompletedProcess) -> str:
    """The command, exit code and output of a finished tool, for assertion messages."""
    cmd = proc.args[proc.args.index(f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}") + 1:] \
        if isinstance(proc.args, list) else proc.args
    return (f"{' '.join(map(str, cmd))}\nexit code {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")


def create_topic(bootstrap: str, topic: str, partitions: int = 1, *configs: str):
    """kafka-topics --create; configs are "name=value" strings. Fails the test on error."""
    args = ["--bootstrap-server", bootstrap, "--create", "--topic", topic,
            "--partitions", str(partitions), "--replication-factor", "1"]
    for config in configs:
        args += ["--config", config]
    proc = run_tool(TOPICS, *args)
    assert proc.returncode == 0 and proc.stdout == f"Created topic {topic}.\n", describe(proc)
    return proc
