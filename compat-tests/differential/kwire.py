"""A tiny raw Kafka protocol client for differential tests.

Requests are built from plain dicts with kafka-python's schema-driven message classes
(`kafka.protocol.*`, generated from Kafka's own JSON message definitions), so any API
version can be sent exactly; responses come back as plain dicts with every field,
including raw error codes. One TCP connection per `Conn`; requests are sequential.
"""
import gzip as _gzip
import socket
import struct
import time
import warnings

# kafka-python's schema loader uses the deprecated importlib.resources.read_text
warnings.filterwarnings("ignore", message=".*is deprecated. Use files", category=DeprecationWarning)

from kafka.protocol.admin.cluster import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.admin import (
    AlterConfigsRequest, AlterConfigsResponse,
    CreatePartitionsRequest, CreatePartitionsResponse,
    CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

APIS = {
    "Produce": (ProduceRequest, ProduceResponse),
    "Fetch": (FetchRequest, FetchResponse),
    "ListOffsets": (ListOffsetsRequest, ListOffsetsResponse),
    "Metadata": (MetadataRequest, MetadataResponse),
    "ApiVersions": (ApiVersionsRequest, ApiVersionsResponse),
    "CreateTopics": (CreateTopicsRequest, CreateTopicsResponse),
    "DeleteTopics": (DeleteTopicsRequest, DeleteTopicsResponse),
    "DeleteRecords": (DeleteRecordsRequest, DeleteRecordsResponse),
    "DescribeConfigs": (DescribeConfigsRequest, DescribeConfigsResponse),
    "AlterConfigs": (AlterConfigsRequest, AlterConfigsResponse),
    "IncrementalAlterConfigs": (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    "CreatePartitions": (CreatePartitionsRequest, CreatePartitionsResponse),
    "UpdateFeatures": (UpdateFeaturesRequest, UpdateFeaturesResponse),
}


def _build(cls, data, version):
    """Turn nested dicts/lists into kafka-python data containers."""
    fields = cls._struct.fields
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            raise KeyError(f"{cls.__name__} has no field {key!r}; fields: {list(fields)}")
        f = fields[key]
        if value is not None and f.is_struct_array():
            value = [_build(f.data_class, v, version) if isinstance(v, dict) else v for v in value]
        elif value is not None and f.is_struct() and isinstance(value, dict):
            value = _build(f.data_class, value, version)
        kwargs[key] = value
    return cls(version=version, **kwargs)


def _plain(obj):
    """Data containers -> dicts of every field (in the decoded version), recursively."""
    struct_ = getattr(obj, "_struct", None)
    if struct_ is not None:
        out = {}
        for name in struct_.fields:
            try:
                out[name] = _plain(getattr(obj, name))
            except AttributeError:
                pass
        return out
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, memoryview):
        return bytes(obj)
    if hasattr(obj, "buffer") and hasattr(obj, "valid_bytes"):  # MemoryRecords
        return bytes(obj.buffer() if callable(obj.buffer) else obj.buffer)
    return obj


class Conn:
    def __init__(self, bootstrap, timeout=30.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def send_raw(self, payload: bytes) -> bytes:
        """Send one framed request body (header included); return the response frame body."""
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def call(self, api, version, data=None, **kw):
        """Send `api` at `version`; return the response as a dict (header stripped)."""
        req_cls, resp_cls = APIS[api]
        data = dict(data or {}, **kw)
        req = _build(req_cls, data, version)
        self.correlation += 1
        req.with_header(correlation_id=self.correlation, client_id="differential")
        if api == "Produce" and data.get("acks") == 0:
            self.sock.sendall(req.encode(version=version, header=True, framed=True))
            return None
        frame = self.send_raw(req.encode(version=version, header=True))
        resp = resp_cls.decode(frame, version=version, header=True)
        assert resp.header.correlation_id == self.correlation
        return _plain(resp)


def call(bootstrap, api, version, data=None, **kw):
    with Conn(bootstrap) as c:
        return c.call(api, version, data, **kw)


def api_versions_raw(bootstrap, version):
    """ApiVersions at an arbitrary (possibly unsupported) version; returns
    (error_code, {api_key: (min, max)}) parsed from the v0-format body."""
    with Conn(bootstrap) as c:
        client_id = b"differential"
        hdr = struct.pack(">hhih", 18, version, 1, len(client_id)) + client_id
        if version >= 3:
            hdr += b"\x00"  # header tagged fields
            # body: compact client_software_name "differential", version "1.0", no tags
            hdr += bytes([len(client_id) + 1]) + client_id + b"\x041.0" + b"\x00"
        body = c.send_raw(hdr)
    corr, err = struct.unpack(">ih", body[:6])
    assert corr == 1
    apis = {}
    # An UNSUPPORTED_VERSION answer is always in the v0 format; v3+ is flexible.
    flexible = version >= 3 and err != 35
    if flexible:
        n, pos = _read_uvarint(body, 6)
        n -= 1
    else:
        n = struct.unpack(">i", body[6:10])[0]
        pos = 10
    for _ in range(max(n, 0)):
        k, lo, hi = struct.unpack(">hhh", body[pos:pos + 6])
        apis[k] = (lo, hi)
        pos += 6
        if flexible:
            pos = _skip_tags(body, pos)
    return err, apis


# ---- record batches ---------------------------------------------------------------

def _varint(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _crc32c(data: bytes) -> int:
    try:
        from crc32c import crc32c  # type: ignore
        return crc32c(data)
    except ImportError:
        from kafka.record.util import calc_crc32c
        return calc_crc32c(data)


CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def compress(codec, data: bytes) -> bytes:
    """A batch's record section compressed as clients write it: gzip, a raw snappy block
    (librdkafka's framing), an LZ4 frame, a zstd frame."""
    if codec == "none":
        return data
    if codec == "gzip":
        return _gzip.compress(data)
    if codec == "snappy":
        import snappy  # python-snappy
        return snappy.compress(data)
    if codec == "lz4":
        import lz4.frame
        return lz4.frame.compress(data)
    if codec == "zstd":
        import zstandard
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(codec)


def encode_record(value, offset_delta, ts_delta=0, key=None):
    """One v2 record, its length prefix included."""
    body = bytearray()
    body += b"\x00"  # attributes
    body += _varint(ts_delta)
    body += _varint(offset_delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(len(value)) + value
    body += _varint(0)  # headers
    return _varint(len(body)) + bytes(body)


def raw_batch(section: bytes, count, last_offset_delta=None, codec="none", first_ts=None, max_ts=None):
    """A v2 batch around an already encoded (and maybe compressed) record section, with
    whatever header fields the caller claims; the CRC is always right."""
    now = int(time.time() * 1000)
    first_ts = now if first_ts is None else first_ts
    max_ts = first_ts if max_ts is None else max_ts
    last_offset_delta = count - 1 if last_offset_delta is None else last_offset_delta
    # attributes .. end: covered by the CRC
    after_crc = struct.pack(">hiqqqhii", CODECS[codec], last_offset_delta, first_ts, max_ts, -1, -1, -1,
                            count) + section
    crc = _crc32c(after_crc)
    # base offset, batch length, partition leader epoch, magic, crc
    batch_len = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, batch_len, -1, 2, crc) + after_crc


def record_batch(values, timestamps=None, base_timestamp=None, key=None, gzip=False):
    """A v2 record batch (magic 2) holding `values` (bytes each), uncompressed or with its
    records gzip-compressed."""
    if timestamps is None:
        now = base_timestamp if base_timestamp is not None else int(time.time() * 1000)
        timestamps = [now] * len(values)
    first_ts, max_ts = timestamps[0], max(timestamps)
    recs = b"".join(encode_record(v, i, ts - first_ts, key) for i, (v, ts) in enumerate(zip(values, timestamps)))
    codec = "gzip" if gzip else "none"
    return raw_batch(compress(codec, recs), len(values), codec=codec, first_ts=first_ts, max_ts=max_ts)


def parse_batches(data: bytes):
    """(offset, timestamp, value) for every record in v2 batches of a fetch response."""
    out = []
    pos = 0
    data = bytes(data or b"")
    while pos + 61 <= len(data):
        base_offset, batch_len = struct.unpack(">qi", data[pos:pos + 12])
        end = pos + 12 + batch_len
        if end > len(data):
            break
        first_ts = struct.unpack(">q", data[pos + 27:pos + 35])[0]
        count = struct.unpack(">i", data[pos + 57:pos + 61])[0]
        p = pos + 61
        for _ in range(count):
            length, p = _read_varint(data, p)
            rec_end = p + length
            p += 1  # attributes
            ts_delta, p = _read_varint(data, p)
            off_delta, p = _read_varint(data, p)
            klen, p = _read_varint(data, p)
            p += max(klen, 0)
            vlen, p = _read_varint(data, p)
            value = data[p:p + vlen] if vlen >= 0 else None
            out.append((base_offset + off_delta, first_ts + ts_delta, value))
            p = rec_end
        pos = end
    return out


def _read_varint(data, p):
    shift = 0
    n = 0
    while True:
        b = data[p]
        p += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (n >> 1) ^ -(n & 1), p


def _read_uvarint(data, p):
    shift = 0
    n = 0
    while True:
        b = data[p]
        p += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, p


def _skip_tags(data, p):
    count, p = _read_uvarint(data, p)
    for _ in range(count):
        _, p = _read_uvarint(data, p)
        size, p = _read_uvarint(data, p)
        p += size
    return p
