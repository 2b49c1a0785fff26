"""Just enough of the Kafka wire protocol for the benchmark's start-up probe.

`first_ack(host, port, topic, deadline)` connects (retrying while the port refuses),
asks for the topic with auto-creation (Metadata v4), and sends one single-record produce
(Produce v3, acks=1) until the broker answers error code 0; it returns the CLOCK_BOOTTIME
instant of that answer. `api_keys(host, port)` lists the API keys a broker advertises
(ApiVersions v0), which tells whether a feature such as consumer groups is served.

For the cluster benchmark's failover probes (cluster.py): `partition_leader` (Metadata v4),
`produce` (Produce v3 with any acks, to one partition) and `create_topic` (CreateTopics v4).

A raw client is used so that the measurement is not blurred by a client library's
connection back-off: it retries every 5 ms.
"""
import socket
import struct
import time

import crc32c  # from the compat suite's venv (compat-tests/requirements.txt)

API_PRODUCE, API_METADATA, API_VERSIONS, API_CREATE_TOPICS = 0, 3, 18, 19
API_FIND_COORDINATOR, API_JOIN_GROUP, API_SYNC_GROUP = 10, 11, 14
CLIENT_ID = b"runnel-bench-probe"


def now() -> float:
    """The clock that /proc/PID/stat's starttime is measured on (seconds)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def record_batch(value: bytes) -> bytes:
    """A v2 record batch holding one record without key or headers."""
    ts = int(time.time() * 1000)
    body = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    record = _varint(len(body)) + body
    # attributes .. records: the part the CRC-32C covers
    tail = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + record
    crc = crc32c.crc32c(tail)
    after_length = struct.pack(">ibI", -1, 2, crc) + tail
    return struct.pack(">qi", 0, len(after_length)) + after_length


class Conn:
    def __init__(self, host: str, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0

    def close(self):
        self.sock.close()

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        """Sends one request (header v1) and returns the response body after the
        correlation id (response header v0)."""
        self.corr += 1
        header = struct.pack(">hhi", api_key, version, self.corr) + _string(CLIENT_ID)
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        payload = self._read(size)
        corr = struct.unpack(">i", payload[:4])[0]
        if corr != self.corr:
            raise ConnectionError(f"correlation id {corr}, expected {self.corr}")
        return payload[4:]

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)


def api_keys(host: str, port: int) -> set:
    c = Conn(host, port)
    try:
        body = c.request(API_VERSIONS, 0, b"")
    finally:
        c.close()
    err, n = struct.unpack(">hi", body[:6])
    if err:
        raise RuntimeError(f"ApiVersions error {err}")
    return {struct.unpack(">h", body[6 + 6 * i:8 + 6 * i])[0] for i in range(n)}


def _metadata(c: Conn, topic: bytes):
    c.request(API_METADATA, 4, struct.pack(">i", 1) + _string(topic) + b"\x01")


def _produce(c: Conn, topic: bytes, batch: bytes, acks: int = 1, partition: int = 0,
             timeout_ms: int = 5000) -> int:
    body = (struct.pack(">hhi", -1, acks, timeout_ms) + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">ii", 1, partition) + struct.pack(">i", len(batch)) + batch)
    resp = c.request(API_PRODUCE, 3, body)
    # [topics: n, name, [partitions: n, index, error_code, ...]]
    pos = 4
    name_len = struct.unpack(">h", resp[pos:pos + 2])[0]
    pos += 2 + name_len + 4 + 4
    return struct.unpack(">h", resp[pos:pos + 2])[0]


def first_ack(host: str, port: int, topic: str, deadline: float, gave_up=None) -> float:
    """Retries until one produce is acknowledged; returns now() at the ack.

    gave_up: optional callable, asked between connection attempts; a non-empty string
    from it (e.g. "the broker process exited") ends the wait with that error at once."""
    t = topic.encode()
    batch = record_batch(b"x" * 1024)
    last = "never connected"
    while now() < deadline:
        try:
            c = Conn(host, port, timeout=2.0)
        except OSError as e:
            last = f"connect: {e}"
            why = gave_up() if gave_up else None
            if why:
                raise RuntimeError(f"no produce acknowledged by {host}:{port}: {why} ({last})")
            time.sleep(0.005)
            continue
        try:
            while now() < deadline:
                _metadata(c, t)
                err = _produce(c, t, batch)
                if err == 0:
                    return now()
                last = f"produce error code {err}"
                time.sleep(0.005)
        except (OSError, ConnectionError, struct.error) as e:
            last = f"{type(e).__name__}: {e}"
            time.sleep(0.005)
        finally:
            c.close()
    raise TimeoutError(f"no produce acknowledged by {host}:{port}: {last}")


class _Reader:
    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 0

    def take(self, fmt: str):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        v = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return v

    def int32s(self):
        return [self.take(">i") for _ in range(self.take(">i"))]


def partition_leader(c: Conn, topic: str, partition: int):
    """(leader id, {broker id: (host, port)}) of one partition, from Metadata v4 without
    auto-creation; leader -1 when the broker names none or does not know the partition."""
    body = c.request(API_METADATA, 4, struct.pack(">i", 1) + _string(topic.encode()) + b"\x00")
    r = _Reader(body)
    r.take(">i")  # throttle_time_ms
    brokers = {}
    for _ in range(r.take(">i")):
        node = r.take(">i")
        host = r.string()
        port = r.take(">i")
        r.string()  # rack
        brokers[node] = (host, port)
    r.string()  # cluster_id
    r.take(">i")  # controller_id
    leader = -1
    for _ in range(r.take(">i")):
        r.take(">h")  # topic error
        name = r.string()
        r.take(">b")  # is_internal
        for _ in range(r.take(">i")):
            err, index, node = r.take(">hii")
            r.int32s()  # replicas
            r.int32s()  # isr
            if name == topic and index == partition and err == 0:
                leader = node
    return leader, brokers


def produce(c: Conn, topic: str, partition: int, acks: int, value: bytes = b"x" * 1024) -> int:
    """One single-record batch to one partition; the partition's error code."""
    return _produce(c, topic.encode(), record_batch(value), acks=acks, partition=partition)


def create_topic(c: Conn, topic: str, partitions: int = 1, replication_factor: int = 1,
                 timeout_ms: int = 5000) -> int:
    """CreateTopics v4 for one topic; its error code (0 = created)."""
    body = (struct.pack(">i", 1) + _string(topic.encode())
            + struct.pack(">ihii", partitions, replication_factor, 0, 0)
            + struct.pack(">ib", timeout_ms, 0))
    r = _Reader(c.request(API_CREATE_TOPICS, 4, body))
    r.take(">i")  # throttle_time_ms
    for _ in range(r.take(">i")):
        name = r.string()
        err = r.take(">h")
        r.string()  # error_message
        if name == topic:
            return err
    raise ConnectionError(f"CreateTopics response names no topic {topic}")
