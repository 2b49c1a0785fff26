"""Drives group members of any client as child processes and checks what they did.

Every member program (GroupConsumer.java, ck_consumer.py, kp_consumer.py, `franz group`)
prints the same JSON lines (see GroupConsumer.java) and obeys the same control directory:
CTL/NAME.nocommit pauses its commits, CTL/stop makes every member close cleanly.

`kill_scenario` is the issue's scenario, for any client:
  1. three members join a group on a 6-partition topic; once each owns 2 partitions,
     disjointly, phase 1 is produced: every record reaches exactly one member, the one
     that owns its partition, and every member commits it;
  2. the victim stops committing, phase 2 is produced and processed (same checks);
  3. the victim is killed with SIGKILL (no LeaveGroup): after the session timeout, and
     not before, the two survivors own all six partitions and re-read the victim's
     uncommitted phase-2 records from its last commit;
  4. phase 3 is produced and processed; then the survivors close.
At the end the union of processed records is everything produced (at-least-once), the
duplicates are exactly the victim's records after its last commit, each seen twice, and
the group's committed offsets (OffsetFetch) are the end offsets of every partition.
"""
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

HERE = Path(__file__).resolve().parent
PARTITIONS = 6


class Member:
    """One group member process and everything it reported."""

    def __init__(self, name, cmd, log_dir: Path, env=None):
        self.name = name
        self.cmd = [str(c) for c in cmd]
        self.stderr_path = log_dir / f"{name}.stderr"
        self.lock = threading.Lock()
        self.events = []          # (monotonic time, event dict)
        self.owned = set()        # current assignment, from the listener callbacks
        self.records = []         # (partition, offset, value) in processing order
        self.committed = {}       # partition -> last committed next-offset
        self.errors = []
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"),
                                     stdin=subprocess.DEVNULL, env=env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            now = time.monotonic()
            with self.lock:
                self.events.append((now, ev))
                kind = ev["e"]
                if kind == "assigned":
                    self.owned |= set(ev["ps"])
                elif kind in ("revoked", "lost"):
                    self.owned -= set(ev["ps"])
                elif kind == "rec":
                    self.records.append((ev["p"], ev["o"], ev["v"]))
                elif kind == "commit":
                    for p, o in ev["offs"].items():
                        self.committed[int(p)] = o
                elif kind in ("commit_error", "error"):
                    self.errors.append(ev)

    def snapshot(self):
        with self.lock:
            return set(self.owned), list(self.records), dict(self.committed)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.reader.join(5)

    def describe(self):
        err = self.stderr_path.read_text(errors="replace")[-3000:] \
            if self.stderr_path.exists() else ""
        with self.lock:
            evs = [e for _, e in self.events if e["e"] != "rec"][-30:]
        return f"--- {self.name} (exit {self.proc.poll()}): events {evs}\nstderr:\n{err}"


def wait_for(cond, timeout, what, members=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n"
                         + "\n".join(m.describe() for m in members))


def balanced(members, partitions=PARTITIONS):
    """Each member owns partitions // len(members) or one more, disjointly, covering all."""
    owned = [m.snapshot()[0] for m in members]
    union = set().union(*owned)
    return (union == set(range(partitions)) and sum(map(len, owned)) == partitions
            and all(len(o) in (partitions // len(members),
                               -(-partitions // len(members))) for o in owned))


def produce_phase(bootstrap, topic, phase, per_partition, partitions=PARTITIONS):
    """per_partition records to every partition; returns {(p, o): value}."""
    from test_confluent_kafka import produce_all
    records = [(i % partitions, f"k{i}".encode(), f"{phase}-{i}".encode(), None, None)
               for i in range(per_partition * partitions)]
    reports = produce_all(bootstrap, topic, records)
    out = {}
    for (err, p, o), rec in zip(reports, records):
        assert err is None, err
        out[(p, o)] = rec[2].decode()
    return out


def end_offsets(produced):
    ends = defaultdict(int)
    for p, o in produced:
        ends[p] = max(ends[p], o + 1)
    return dict(ends)


def committed_offsets(bootstrap, group, topic, partitions=PARTITIONS):
    """OffsetFetch through librdkafka: {partition: offset} (negative = none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


def kill_scenario(bootstrap, topic, group, ctl: Path, spawn, session_ms, per_phase=20):
    """spawn(name) starts one member and returns a Member. See the module docstring."""
    from test_confluent_kafka import create_topic
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    ctl.mkdir(parents=True, exist_ok=True)
    members = [spawn(f"m{i}") for i in range(3)]
    try:
        _run(bootstrap, topic, group, ctl, members, session_ms, per_phase)
    finally:
        stop_members(ctl, members)


def stop_members(ctl: Path, members):
    """Ask every member to stop (the ctl dir's stop file); kill those still running after 30 s."""
    (ctl / "stop").touch()
    for m in members:
        try:
            m.proc.wait(30)
        except subprocess.TimeoutExpired:
            m.kill()


def _consumed_ok(members, produced, owners):
    """Every produced record processed exactly once, by the member owning its partition."""
    seen = Counter()
    for m in members:
        for p, o, v in m.snapshot()[1]:
            if (p, o) in produced:
                assert v == produced[(p, o)], f"{m.name} read {v!r} at {p}/{o}"
                assert owners[p] is m, \
                    f"{m.name} processed {p}/{o} but partition {p} belongs to {owners[p].name}"
                seen[(p, o)] += 1
    dups = {k: n for k, n in seen.items() if n > 1}
    assert not dups, f"records processed more than once: {sorted(dups)[:10]}"
    return len(seen) == len(produced)


def _run(bootstrap, topic, group, ctl, members, session_ms, per_phase):
    wait_for(lambda: balanced(members), 45, "3 members to share 6 partitions", members)
    owners = {p: m for m in members for p in m.snapshot()[0]}
    victim, survivors = members[0], members[1:]
    victim_parts = victim.snapshot()[0]

    # Phase 1: everything is processed exactly once and committed by its owner.
    p1 = produce_phase(bootstrap, topic, "p1", per_phase)
    ends1 = end_offsets(p1)
    wait_for(lambda: _consumed_ok(members, p1, owners), 30, "phase 1 consumed", members)
    wait_for(lambda: all(owners[p].snapshot()[2].get(p) == e for p, e in ends1.items()),
             20, "phase 1 committed", members)
    assert balanced(members), "assignment changed although no member joined or left\n" \
        + "\n".join(m.describe() for m in members)

    # Phase 2: the victim processes without committing.
    (ctl / f"{victim.name}.nocommit").touch()
    p2 = produce_phase(bootstrap, topic, "p2", per_phase)
    ends2 = end_offsets({**p1, **p2})
    both = {**p1, **p2}
    wait_for(lambda: _consumed_ok(members, both, owners), 30, "phase 2 consumed", members)
    wait_for(lambda: all(owners[p].snapshot()[2].get(p) == e for p, e in ends2.items()
                         if p not in victim_parts), 20, "survivors' phase 2 committed",
             members)
    assert {p: victim.snapshot()[2].get(p) for p in victim_parts} == \
        {p: ends1[p] for p in victim_parts}, "the victim committed after .nocommit"
    victim_uncommitted = {k for k in p2 if k[0] in victim_parts}
    assert victim_uncommitted, "the victim has no uncommitted records; nothing is tested"

    # Kill the victim: no LeaveGroup, so only the session timeout can free its partitions.
    killed_at = time.monotonic()
    victim.kill()
    moved_at = wait_for(lambda: balanced(survivors), session_ms / 1000 + 30,
                        "the survivors to take over the victim's partitions", members)
    elapsed = moved_at - killed_at
    print(f"takeover {elapsed:.1f}s after the kill; "
          f"{len(victim_uncommitted)} uncommitted records of the victim")
    # The victim's last heartbeat was at most one heartbeat interval before the kill.
    hb = max(0.5, session_ms / 6000)
    assert elapsed >= session_ms / 1000 - hb - 0.5, \
        f"partitions moved {elapsed:.1f}s after the kill, before the {session_ms} ms session timeout"
    assert elapsed <= session_ms / 1000 + 20, f"partitions moved only after {elapsed:.1f}s"

    # The survivors resume the victim's partitions at its last commit.
    def redelivered():
        got = Counter((p, o) for m in survivors for p, o, _ in m.snapshot()[1])
        return all(got[k] >= 1 for k in victim_uncommitted)
    wait_for(redelivered, 30, "the victim's uncommitted records to be re-delivered", members)

    # Phase 3 after the takeover.
    p3 = produce_phase(bootstrap, topic, "p3", per_phase)
    produced = {**p1, **p2, **p3}
    ends = end_offsets(produced)

    def all_committed():
        last = {}
        for m in survivors:
            for p, o in m.snapshot()[2].items():
                last[p] = max(last.get(p, 0), o)
        return all(last.get(p) == e for p, e in ends.items())
    wait_for(all_committed, 30, "phase 3 processed and committed by the survivors", members)

    (ctl / "stop").touch()
    for m in survivors:
        assert m.proc.wait(30) == 0, m.describe()
        m.reader.join(5)

    seen = Counter()
    for m in members:
        for p, o, v in m.snapshot()[1]:
            assert produced.get((p, o)) == v, f"{m.name} read {v!r} at {p}/{o}"
            seen[(p, o)] += 1
    missing = sorted(set(produced) - set(seen))
    assert not missing, f"records never processed (at-least-once violated): {missing[:10]}"
    dups = {k for k, n in seen.items() if n > 1}
    assert dups == victim_uncommitted, \
        f"duplicates {sorted(dups - victim_uncommitted)[:10]} are not the victim's records " \
        f"after its last commit, or {sorted(victim_uncommitted - dups)[:10]} were not re-read"
    assert all(seen[k] == 2 for k in dups), "a record was processed more than twice"
    for m in survivors:
        assert not m.errors, f"{m.name} reported errors: {m.errors[:5]}"
    assert committed_offsets(bootstrap, group, topic) == ends, \
        "OffsetFetch disagrees with the last commits"
