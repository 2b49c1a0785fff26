"""The checker must see each anomaly it exists for (it runs without a broker)."""
from checker import check


def ack(w, seq, p, o):
    return {"w": w, "seq": seq, "p": p, "o": o}


def rec(p, o, v):
    return {"p": p, "o": o, "v": v}


CLEAN_ACKS = [ack(0, 0, 0, 0), ack(0, 1, 0, 1), ack(1, 0, 1, 0)]
CLEAN_LOG = [rec(0, 0, "w0-0"), rec(0, 1, "w0-1"), rec(1, 0, "w1-0")]


def test_a_clean_history_has_no_anomalies():
    r = check(CLEAN_ACKS, CLEAN_LOG[:2], CLEAN_LOG)
    assert r.ok(), r.anomalies()
    assert r.summary()["acked"] == 3


def test_a_lost_acknowledged_write():
    r = check(CLEAN_ACKS, [], CLEAN_LOG[:2])
    assert [x["value"] for x in r.lost] == ["w1-0"]


def test_an_unacknowledged_write_may_be_missing_or_present():
    acks = CLEAN_ACKS + [{"w": 1, "seq": 1, "err": "timeout"}, {"w": 1, "seq": 2, "err": "timeout"}]
    r = check(acks, [], CLEAN_LOG + [rec(1, 1, "w1-1")])
    assert r.ok(), r.anomalies()
    assert r.indeterminate == 2


def test_a_duplicate():
    r = check(CLEAN_ACKS, [], CLEAN_LOG + [rec(0, 2, "w0-1")])
    assert [x["value"] for x in r.duplicates] == ["w0-1"]


def test_one_offset_two_values_across_readers():
    r = check(CLEAN_ACKS, [rec(1, 0, "w9-9")], CLEAN_LOG)
    assert len(r.inconsistent) == 1


def test_acknowledged_at_another_offset():
    acks = [ack(0, 0, 0, 0), ack(0, 1, 0, 5)]
    r = check(acks, [], CLEAN_LOG[:2])
    assert r.inconsistent and not r.lost


def test_a_writer_reordered():
    log = [rec(0, 0, "w0-1"), rec(0, 1, "w0-0")]
    r = check([ack(0, 0, 0, 1), ack(0, 1, 0, 0)], [], log)
    assert len(r.reordered) == 1


def test_a_phantom_value():
    r = check(CLEAN_ACKS, [], CLEAN_LOG + [rec(1, 1, "w7-0")])
    assert [x["value"] for x in r.phantom] == ["w7-0"]
