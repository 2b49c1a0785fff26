"""A rolling upgrade from an earlier runnel release to this build (`scripts/upgrade-check.sh
REV` builds REV and runs this; skipped without RUNNEL_PREVIOUS_BIN).

Five brokers, three of them controller voters, all on the earlier release, and a topic on
brokers 4, 5 and 3 with min.insync.replicas=2. The voters are upgraded first, one at a
time: the controller then runs this build while brokers 4 and 5 still run the earlier
one. A release before eligible leader replicas (KIP-966) cannot read their records (a
newer metadata record format), so then the controller keeps the old rules: with 5 and
then 3 stopped cleanly, the ISR is [4] and no replica is eligible (from a release that
reads them, 3 is eligible already). Once every broker runs this build, the same steps
make 3 an eligible leader replica. Every acknowledged record is read at the end,
after writes at every step of the upgrade. A feature level is a record of a newer format
too: the controller refuses UpdateFeatures until every broker runs this build."""
import os

import pytest

import netns
from differential import kwire
from cluster_fixtures import produce_acked, read_values, runnel_bin, start_cluster, wait_for  # noqa: F401
from kafka_tools import TOPICS, describe, run_tool
from test_admin_tools import feature_rows, features
from test_cluster_tools import bootstrap, elrs, partitions

why_not = netns.available()
PREVIOUS = os.environ.get("RUNNEL_PREVIOUS_BIN")
pytestmark = [
    pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                       reason=why_not or "starts its own brokers"),
    pytest.mark.skipif(not PREVIOUS, reason="needs an earlier release's binary: scripts/upgrade-check.sh REV"),
]


@pytest.fixture
def previous_cluster5(tmp_path):
    yield from start_cluster(tmp_path, PREVIOUS, 5, voters=3)


def test_rolling_upgrade_keeps_every_acknowledged_record_and_turns_eligible_leaders_on_at_the_end(
        previous_cluster5, runnel_bin):
    net, nodes = previous_cluster5
    servers = bootstrap(nodes)
    n3, n4, n5 = nodes[2], nodes[3], nodes[4]
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "upgrade",
                    "--replica-assignment", "4:5:3", "--config", "min.insync.replicas=2", timeout=60)
    assert proc.returncode == 0, describe(proc)
    acknowledged = []

    def write(step):
        values = [f"{step}-{i}" for i in range(100)]
        produce_acked(bootstrap(nodes), "upgrade", values)
        acknowledged.extend(values)

    def isr(via):
        return sorted(partitions(via, "upgrade")[0][2])

    def upgrade(node):
        node.stop()
        node.binary = runnel_bin
        node.start(60)
        wait_for(f"{node.host} back in sync", lambda: isr(servers) == [3, 4, 5])

    write("previous")
    wait_for("all three in sync", lambda: isr(servers) == [3, 4, 5])
    rows = feature_rows(features(servers, "describe").stdout)
    previous_keeps_elr = rows.get("eligible.leader.replicas.version", {}).get("FinalizedVersionLevel") == "1"
    for voter in nodes[:3]:
        upgrade(voter)
        write(f"{voter.host}-upgraded")

    # The controller runs this build; brokers 4 and 5 do not.
    new_voters = bootstrap(nodes[:2])
    turn_off = {"feature": "eligible.leader.replicas.version", "max_version_level": 0, "upgrade_type": 2}

    def update_features(validate_only):
        return kwire.call(nodes[0].address, "UpdateFeatures", 1, timeout_ms=30000, validate_only=validate_only,
                          feature_updates=[turn_off])

    refused = update_features(False)
    assert refused["error_code"] == 95 and "Broker 4 does not support this feature." in refused["error_message"], \
        refused
    n5.stop()
    wait_for("5 out of the ISR", lambda: isr(new_voters) == [3, 4])
    n3.stop()
    wait_for("3 out of the ISR", lambda: isr(new_voters) == [4])
    if previous_keeps_elr:
        assert elrs(new_voters, "upgrade")[0] == ([3], []), "every broker reads ELR records"
    else:
        assert elrs(new_voters, "upgrade")[0] == ([], []), "an older broker could not read the ELR records"
    n3.start(60)
    n5.binary = runnel_bin
    n5.start(60)
    wait_for("back in sync", lambda: isr(servers) == [3, 4, 5])
    upgrade(n4)
    write("all-upgraded")
    assert update_features(True)["error_code"] == 0, "every broker reads feature levels now"

    n5.stop()
    wait_for("5 out of the ISR", lambda: isr(new_voters) == [3, 4])
    n3.stop()
    wait_for("3 out of the ISR", lambda: isr(new_voters) == [4])
    assert elrs(new_voters, "upgrade")[0] == ([3], []), "below the minimum, 3 is eligible once all run this build"
    n3.start(60)
    n5.start(60)
    wait_for("back in sync", lambda: isr(servers) == [3, 4, 5])
    write("after")
    assert read_values(servers, "upgrade", len(acknowledged)) == acknowledged
