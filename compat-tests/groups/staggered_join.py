"""Issue 12's group scenario: three members of one group join one after another (a
rebalance each time) on a 3-partition topic holding 12 records, 4 per partition.

The report was that after a rebalance one member received only 8 of the 12 records its
partitions held within 30 s. What a member is owed after a rebalance is the records from
its partitions' committed offsets on (what an earlier owner processed and committed is
not re-delivered, by Kafka too), so the checks are:
  1. records produced before anyone joins are processed at least once by the group while
     members join, and end up committed (OffsetFetch shows the end offsets);
  2. once the three own one partition each, records produced then reach the member that
     owns their partition, every one of them, and no other member;
  3. at the end the committed offsets are the end offsets of every partition.
Every wait has a deadline; nothing depends on how fast a step is.
"""
from collections import Counter

from groups.harness import balanced, committed_offsets, produce_phase, wait_for

PARTITIONS = 3
PER_PARTITION = 4


def _produce(bootstrap, topic, phase):
    return produce_phase(bootstrap, topic, phase, PER_PARTITION, PARTITIONS)


def _committed(bootstrap, group, topic):
    return committed_offsets(bootstrap, group, topic, PARTITIONS)


def _seen(members):
    return Counter((p, o) for m in members for p, o, _ in m.snapshot()[1])


def staggered_join_scenario(bootstrap, topic, group, spawn):
    """spawn(name) starts one member (a groups.harness.Member); returns the members."""
    from test_confluent_kafka import create_topic
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = _produce(bootstrap, topic, "before")
    members = []
    for i in range(3):
        members.append(spawn(f"m{i}"))
        wait_for(lambda: balanced(members, PARTITIONS), 45,
                 f"{len(members)} member(s) to share {PARTITIONS} partitions", members)

    # 1. Everything produced before the joins is processed and committed by the group.
    wait_for(lambda: all(_seen(members)[k] >= 1 for k in before), 30,
             "the records produced before the joins to be processed", members)
    ends = {p: PER_PARTITION for p in range(PARTITIONS)}
    wait_for(lambda: _committed(bootstrap, group, topic) == ends, 30,
             f"the group's commits to reach {ends}", members)
    for m in members:
        for p, o, v in m.snapshot()[1]:
            assert before.get((p, o)) == v, f"{m.name} read {v!r} at {p}/{o}"

    # 2. After the last rebalance, every record reaches the owner of its partition.
    owners = {p: m for m in members for p in m.snapshot()[0]}
    seen_before = {m.name: len(m.snapshot()[1]) for m in members}
    after = _produce(bootstrap, topic, "after")

    def owed_received():
        for m in members:
            got = {(p, o) for p, o, _ in m.snapshot()[1][seen_before[m.name]:]}
            owed = {k for k in after if owners[k[0]] is m}
            if not owed <= got:
                return False
        return True
    try:
        wait_for(owed_received, 30, "each member to receive its partitions' new records",
                 members)
    except AssertionError:
        report = []
        for m in members:
            got = {(p, o) for p, o, _ in m.snapshot()[1][seen_before[m.name]:]}
            owed = {k for k in after if owners[k[0]] is m}
            report.append(f"{m.name} owns {sorted(m.snapshot()[0])}: "
                          f"{len(owed & got)} of {len(owed)}, missing {sorted(owed - got)}")
        raise AssertionError("\n".join(report) + "\n" + "\n".join(m.describe() for m in members))
    for m in members:
        for p, o, v in m.snapshot()[1][seen_before[m.name]:]:
            assert after.get((p, o)) == v, f"{m.name} read {v!r} at {p}/{o}"
            assert owners[p] is m, f"{m.name} read {p}/{o} but {owners[p].name} owns it"
    assert balanced(members, PARTITIONS), "the assignment changed although nobody joined"

    # 3. And it is all committed.
    ends = {p: 2 * PER_PARTITION for p in range(PARTITIONS)}
    wait_for(lambda: _committed(bootstrap, group, topic) == ends, 30,
             f"the group's commits to reach {ends}", members)
    for m in members:
        # (A commit that races a rebalance may be refused; that is not an error here.)
        errors = [e for e in m.errors if e["e"] == "error"]
        assert not errors, f"{m.name} reported errors: {errors[:5]}"
    return members
