"""The controller quorum as Kafka 4.4's `kafka-metadata-quorum` shows it, and what its
`add-controller` reads of a node: for the cluster tool tests and the fault harness."""
import re

from kafka_tools import describe, run_tool

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"   # kafka-metadata-quorum.sh


def quorum_status(servers):
    """kafka-metadata-quorum describe --status, as a dict of its `Key: value` lines."""
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "describe", "--status", timeout=60)
    assert proc.returncode == 0, describe(proc)
    return dict(re.match(r"(\w+):\s+(.*)", line).groups() for line in proc.stdout.splitlines() if ":" in line)


def voter_ids(servers):
    return sorted(int(v) for v in re.findall(r'"id": (\d+)', quorum_status(servers)["CurrentVoters"]))


def replication_rows(servers):
    """kafka-metadata-quorum describe --replication: {node id: {column: value}}."""
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "describe", "--replication", timeout=60)
    assert proc.returncode == 0, describe(proc)
    lines = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    header = lines[0]
    return {int(r[0]): dict(zip(header, r)) for r in lines[1:]}


def meta_properties(node):
    return dict(line.split("=", 1) for line in (node.data_dir / "meta.properties").read_text().splitlines()
                if "=" in line and not line.startswith("#"))


def controller_config(net, node, tmp_path):
    """What `kafka-metadata-quorum add-controller --command-config` reads of the node to
    add: its id, its controller listener and, from metadata.log.dir, its meta.properties."""
    config = tmp_path / f"controller-{node.host}.properties"
    node_id = meta_properties(node)["node.id"]
    config.write_text(f"node.id={node_id}\nprocess.roles=broker,controller\nmetadata.log.dir={node.data_dir}\n"
                      f"controller.listener.names=CONTROLLER\n"
                      f"listeners=CONTROLLER://{net.ips[node.host]}:9093\n")
    return config
