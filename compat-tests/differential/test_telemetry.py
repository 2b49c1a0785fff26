"""KIP-714 GetTelemetrySubscriptions (71) and PushTelemetry (72), raw on the wire (the
Python client library has no types for them): with no client-metrics subscription, the
answer to a new client and Kafka's refusals of pushes, in ClientMetricsManager's order.

Kafka 4.4 answers these requests without a metrics-receiver plugin (it only leaves them
out of ApiVersions then); runnel always serves them."""
import struct
import uuid

from . import kwire

UNSUPPORTED_COMPRESSION_TYPE = 76
THROTTLING_QUOTA_EXCEEDED = 89
UNKNOWN_SUBSCRIPTION_ID = 117
INVALID_REQUEST = 42


def _request(conn, api_key, body):
    """Request header v2 (flexible: no tags), `body`; returns the response body after a
    response header v1 (correlation id, no tags)."""
    conn.correlation += 1
    client_id = b"differential"
    header = struct.pack(">hhih", api_key, 0, conn.correlation, len(client_id)) + client_id + b"\x00"
    frame = conn.send_raw(header + body)
    assert struct.unpack(">i", frame[:4])[0] == conn.correlation
    return frame[5:]


def get_subscriptions(conn, instance_id: bytes):
    data = _request(conn, 71, instance_id + b"\x00")
    throttle, error = struct.unpack(">ih", data[:6])
    p = 6
    instance, p = data[p:p + 16], p + 16
    (subscription_id,) = struct.unpack(">i", data[p:p + 4])
    p += 4
    n, p = kwire._read_uvarint(data, p)
    codecs = list(struct.unpack(f">{max(n - 1, 0)}b", data[p:p + n - 1])) if n else None
    p += max(n - 1, 0)
    interval, max_bytes, delta = struct.unpack(">ii?", data[p:p + 9])
    p += 9
    count, p = kwire._read_uvarint(data, p)
    metrics = []
    for _ in range(max(count - 1, 0)):
        size, p = kwire._read_uvarint(data, p)
        metrics.append(data[p:p + size - 1].decode())
        p += size - 1
    return dict(error=error, instance=instance, subscription_id=subscription_id, codecs=codecs,
                interval=interval, max_bytes=max_bytes, delta=delta, metrics=metrics)


def push(conn, instance_id: bytes, subscription_id: int, compression: int = 0, terminating=False) -> int:
    body = instance_id + struct.pack(">i?b", subscription_id, terminating, compression) + b"\x01" + b"\x00"
    data = _request(conn, 72, body)
    return struct.unpack(">ih", data[:6])[1]


def test_a_new_client_without_a_subscription(bootstrap):
    with kwire.Conn(bootstrap) as c:
        sub = get_subscriptions(c, bytes(16))
        assert sub["error"] == 0
        assert sub["instance"] != bytes(16)
        assert sub["codecs"] == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
        assert (sub["interval"], sub["max_bytes"], sub["delta"], sub["metrics"]) == (300000, 1048576, True, [])
        # Asked again before the push interval: throttled.
        assert get_subscriptions(c, sub["instance"])["error"] == THROTTLING_QUOTA_EXCEEDED


def test_push_refusals_in_kafkas_order(bootstrap):
    with kwire.Conn(bootstrap) as c:
        assert push(c, bytes(16), 1) == INVALID_REQUEST
        assert push(c, uuid.uuid4().bytes, 1) == UNKNOWN_SUBSCRIPTION_ID
        sub = get_subscriptions(c, bytes(16))
        # Right after the get a push is on time; the codec is checked after the id.
        assert push(c, sub["instance"], sub["subscription_id"], compression=9) == UNSUPPORTED_COMPRESSION_TYPE
        # A second push within the interval is too early; a terminating one is not.
        assert push(c, sub["instance"], sub["subscription_id"]) == THROTTLING_QUOTA_EXCEEDED
        assert push(c, sub["instance"], sub["subscription_id"], terminating=True) == 0
        # Nothing is accepted after a terminating push.
        assert push(c, sub["instance"], sub["subscription_id"], terminating=True) == INVALID_REQUEST
