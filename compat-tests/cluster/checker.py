"""A Jepsen-style checker for the fault harness's histories.

Inputs (JSON lines written by `franz workload` and `franz readall`):
* acks: {"w","seq","p","o"} for every acknowledged write, {"w","seq","err"} for a write
  whose outcome the client does not know (it may or may not be in the log);
* observed: {"p","o","v"} for every record a reader saw while faults happened;
* final: {"p","o","v"} for every record of a full read-back after the faults.

Anomalies, each of which must be zero:
* lost: an acknowledged value missing from the final read-back;
* duplicates: one value stored at two offsets (in the final read-back);
* inconsistent: one (partition, offset) holding two values across acknowledgements,
  observations and the read-back, or a value acknowledged at an offset other than the
  one it is stored at;
* reordered: two writes of one writer (which writes one partition, one record after
  the other's acknowledgement order is the sequence order) stored in the opposite order;
* phantom: a value in the log that no writer ever tried to write.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

VALUE = re.compile(r"^w(\d+)-(\d+)$")


def read_lines(path):
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line:
            out.append(json.loads(line))
    return out


@dataclass
class Report:
    acked: int = 0
    indeterminate: int = 0
    final_records: int = 0
    observed_records: int = 0
    lost: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    inconsistent: list = field(default_factory=list)
    reordered: list = field(default_factory=list)
    phantom: list = field(default_factory=list)

    def anomalies(self):
        return {k: getattr(self, k) for k in ("lost", "duplicates", "inconsistent", "reordered", "phantom")
                if getattr(self, k)}

    def ok(self):
        return not self.anomalies()

    def summary(self):
        return {
            "acked": self.acked,
            "indeterminate": self.indeterminate,
            "final_records": self.final_records,
            "observed_records": self.observed_records,
            **{k: len(getattr(self, k)) for k in ("lost", "duplicates", "inconsistent", "reordered", "phantom")},
        }


def check(acks, observed, final, limit=20):
    """Compare the histories; anomaly lists hold at most `limit` examples each."""
    r = Report(observed_records=len(observed), final_records=len(final))
    acked = {}  # value -> (p, o)
    attempted = set()
    for a in acks:
        v = f"w{a['w']}-{a['seq']}"
        attempted.add(v)
        if a.get("err"):
            r.indeterminate += 1
        else:
            r.acked += 1
            acked[v] = (a["p"], a["o"])

    def note(lst, item):
        if len(lst) < limit:
            lst.append(item)

    # One value per (partition, offset), across every source.
    at = {}
    for source, rows in (("final", final), ("observed", observed)):
        for row in rows:
            key = (row["p"], row["o"])
            prev = at.setdefault(key, (row["v"], source))
            if prev[0] != row["v"]:
                note(r.inconsistent, {"partition": key[0], "offset": key[1], prev[1]: prev[0], source: row["v"]})
    for v, key in acked.items():
        stored = at.get(key)
        if stored is not None and stored[0] != v:
            note(r.inconsistent, {"partition": key[0], "offset": key[1], "acked": v, stored[1]: stored[0]})

    # Where each value is stored in the final read-back.
    where = {}
    for row in final:
        where.setdefault(row["v"], []).append((row["p"], row["o"]))
    for v, places in where.items():
        if len(places) > 1:
            note(r.duplicates, {"value": v, "at": sorted(places)})
        if v not in attempted:
            note(r.phantom, {"value": v, "at": places[0]})
    for v, key in acked.items():
        if v not in where:
            note(r.lost, {"value": v, "acked_at": key})
        elif key not in where[v]:
            note(r.inconsistent, {"value": v, "acked_at": key, "stored_at": where[v]})

    # Per writer: sequence order equals offset order within its partition.
    by_writer = {}
    for v, places in where.items():
        m = VALUE.match(v)
        if m:
            p, o = min(places)
            by_writer.setdefault((int(m.group(1)), p), []).append((o, int(m.group(2))))
    for (w, p), rows in by_writer.items():
        rows.sort()
        for (o1, s1), (o2, s2) in zip(rows, rows[1:]):
            if s2 < s1:
                note(r.reordered, {"writer": w, "partition": p, "offsets": [o1, o2], "seqs": [s1, s2]})
    return r


def check_files(acks_path, observed_path, final_path):
    return check(read_lines(acks_path), read_lines(observed_path), read_lines(final_path))
