"""ListOffsets by timestamp, earliest/latest/max-timestamp, and watermarks after DeleteRecords."""
import pytest

from . import kwire
from .helpers import create_topic, delete_records, fetch, list_offsets, produce_ok

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
T0 = 1_700_000_000_000  # explicit CreateTime timestamps, far from "now"


def lookup(conn, topic, ts, version):
    p = list_offsets(conn, topic, ts, version=version)
    assert p["error_code"] == 0, p
    return (p["offset"], p["timestamp"])


@pytest.fixture
def timed_topic(conn, topic):
    """Offsets 0..3 at T0+1000, +2000, +2000, +3000, one batch each."""
    create_topic(conn, topic)
    for i, ts in enumerate([T0 + 1000, T0 + 2000, T0 + 2000, T0 + 3000]):
        assert produce_ok(conn, topic, [b"r%d" % i], timestamps=[ts]) == i
    return topic


@pytest.mark.parametrize("version", [1, 7, 9])
@pytest.mark.parametrize("target,expected", [
    (T0, (0, T0 + 1000)),             # before the first record
    (T0 + 1000, (0, T0 + 1000)),      # exactly the first
    (T0 + 1500, (1, T0 + 2000)),      # between: the next one
    (T0 + 2000, (1, T0 + 2000)),      # equal timestamps: the first of them
    (T0 + 3000, (3, T0 + 3000)),      # exactly the last
    (T0 + 3001, (-1, -1)),            # after the last: no offset
    (0, (0, T0 + 1000)),
], ids=["before", "at-first", "between", "at-duplicate", "at-last", "after", "zero"])
def test_list_offsets_by_timestamp(conn, timed_topic, version, target, expected):
    assert lookup(conn, timed_topic, target, version) == expected


@pytest.mark.parametrize("version", [1, 7, 9])
def test_list_offsets_earliest_latest(conn, timed_topic, version):
    assert lookup(conn, timed_topic, EARLIEST, version) == (0, -1)
    assert lookup(conn, timed_topic, LATEST, version) == (4, -1)


@pytest.mark.parametrize("version", [7, 9])
def test_list_offsets_max_timestamp(conn, timed_topic, version):
    assert lookup(conn, timed_topic, MAX_TIMESTAMP, version) == (3, T0 + 3000)


def test_list_offsets_leader_epoch(conn, timed_topic):
    """v4+ carries the leader epoch of the offset found."""
    for ts in (T0 + 1500, EARLIEST, LATEST, MAX_TIMESTAMP):
        assert list_offsets(conn, timed_topic, ts, version=9)["leader_epoch"] == 0


def test_list_offsets_leader_epoch_when_nothing_found(conn, timed_topic, topic):
    p = list_offsets(conn, timed_topic, T0 + 9999, version=9)
    assert (p["offset"], p["timestamp"], p["leader_epoch"]) == (-1, -1, -1)
    empty = topic + "-empty"
    create_topic(conn, empty)
    p = list_offsets(conn, empty, MAX_TIMESTAMP, version=9)
    assert (p["offset"], p["timestamp"], p["leader_epoch"]) == (-1, -1, -1)


def test_list_offsets_out_of_order_timestamps(conn, topic):
    """One batch with timestamps 3000, 1000, 2000: the first record at or after the target."""
    create_topic(conn, topic)
    produce_ok(conn, topic, [b"a", b"b", b"c"], timestamps=[T0 + 3000, T0 + 1000, T0 + 2000])
    assert lookup(conn, topic, T0 + 1500, 9) == (0, T0 + 3000)
    assert lookup(conn, topic, T0 + 500, 9) == (0, T0 + 3000)
    assert lookup(conn, topic, MAX_TIMESTAMP, 9) == (0, T0 + 3000)


def test_list_offsets_out_of_order_batches(conn, topic):
    """Batches at 3000, 1000, 2000: Kafka answers the first batch whose max timestamp >= target."""
    create_topic(conn, topic)
    for ts in (T0 + 3000, T0 + 1000, T0 + 2000):
        produce_ok(conn, topic, [b"x"], timestamps=[ts])
    assert lookup(conn, topic, T0 + 1500, 9) == (0, T0 + 3000)
    assert lookup(conn, topic, T0 + 3500, 9) == (-1, -1)
    assert lookup(conn, topic, MAX_TIMESTAMP, 9) == (0, T0 + 3000)


def test_list_offsets_empty_topic(conn, topic):
    create_topic(conn, topic)
    assert lookup(conn, topic, EARLIEST, 9) == (0, -1)
    assert lookup(conn, topic, LATEST, 9) == (0, -1)
    assert lookup(conn, topic, T0, 9) == (-1, -1)
    p = list_offsets(conn, topic, MAX_TIMESTAMP, version=9)
    assert (p["error_code"], p["offset"], p["timestamp"]) == (0, -1, -1)


# ---- DeleteRecords and watermarks ----------------------------------------------------

@pytest.fixture
def trimmed_topic(conn, topic):
    """Ten records, one per batch, at T0+i*1000; then DeleteRecords before offset 5."""
    create_topic(conn, topic)
    for i in range(10):
        produce_ok(conn, topic, [b"r%d" % i], timestamps=[T0 + i * 1000])
    p = delete_records(conn, topic, 5)
    assert (p["error_code"], p["low_watermark"]) == (0, 5)
    return topic


def test_watermarks_after_delete_records(conn, trimmed_topic):
    assert lookup(conn, trimmed_topic, EARLIEST, 9) == (5, -1)
    assert lookup(conn, trimmed_topic, LATEST, 9) == (10, -1)
    p = fetch(conn, trimmed_topic, 5)
    assert (p["error_code"], p["high_watermark"], p["log_start_offset"], p["last_stable_offset"]) == (0, 10, 5, 10)


def test_fetch_at_new_log_start(conn, trimmed_topic):
    p = fetch(conn, trimmed_topic, 5)
    got = [(o, v) for o, _, v in kwire.parse_batches(p["records"]) if o >= 5]
    assert got == [(i, b"r%d" % i) for i in range(5, 10)]


def test_list_offsets_by_timestamp_after_delete_records(conn, trimmed_topic):
    """A timestamp of a deleted record resolves to the log start offset."""
    assert lookup(conn, trimmed_topic, T0 + 1000, 9) == (5, T0 + 5000)
    assert lookup(conn, trimmed_topic, T0 + 7000, 9) == (7, T0 + 7000)
    assert lookup(conn, trimmed_topic, MAX_TIMESTAMP, 9) == (9, T0 + 9000)


def test_delete_records_is_monotonic(conn, trimmed_topic):
    """Deleting before an offset below the current log start is a no-op success."""
    p = delete_records(conn, trimmed_topic, 2)
    assert (p["error_code"], p["low_watermark"]) == (0, 5)
    p = delete_records(conn, trimmed_topic, 10)
    assert (p["error_code"], p["low_watermark"]) == (0, 10)
    assert lookup(conn, trimmed_topic, EARLIEST, 9) == (10, -1)
    # The max-timestamp record is below the log start now, yet both answer it.
    assert lookup(conn, trimmed_topic, MAX_TIMESTAMP, 9) == (9, T0 + 9000)


POLICY_VIOLATION = 44


@pytest.mark.parametrize("policy,expected", [("compact", POLICY_VIOLATION), ("compact,delete", 0)])
@pytest.mark.parametrize("offset", [0, 7, -1])
def test_delete_records_needs_the_delete_policy(conn, topic, policy, expected, offset):
    """DeleteRecords on a topic whose cleanup.policy lacks `delete` is refused before the
    offset is even looked at (7 is beyond the empty log's high watermark)."""
    create_topic(conn, topic, configs={"cleanup.policy": policy})
    p = delete_records(conn, topic, offset)
    if expected == 0 and offset == 7:
        expected = 1  # OFFSET_OUT_OF_RANGE
    assert p["error_code"] == expected, p


def test_list_offsets_by_timestamp_inside_a_compressed_batch(conn, topic):
    """Both lookups are exact per record inside a gzip batch, not per batch."""
    create_topic(conn, topic)
    produce_ok(conn, topic, [b"a", b"b", b"c"], timestamps=[T0, T0 + 2000, T0 + 1000], gzip=True)
    assert lookup(conn, topic, T0 + 500, 9) == (1, T0 + 2000)
    assert lookup(conn, topic, T0 + 2000, 9) == (1, T0 + 2000)
    assert lookup(conn, topic, MAX_TIMESTAMP, 9) == (1, T0 + 2000)
