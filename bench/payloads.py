"""Text-like record payloads for the benchmark's compression figures.

ProducerPerformance's default payload (`--record-size`) is uniformly random A-Z bytes, about
4.7 bits of entropy per byte: every codec shrinks it by a fixed ~40 % and none finds any
structure. Real topics carry structured text, so the codec figures feed the tool a
`--payload-file` of JSON log events instead: each line one event of exactly `size` ASCII
bytes, with the fields such a log has (timestamps, levels, services, hosts, request paths,
status codes, durations, random trace ids, a free-text message of Zipf-distributed words).
The tool sends a randomly picked line per record, so a batch mixes many distinct events.

The lines depend only on (count, size, seed): both brokers, and a before/after pair of runs,
get the same bytes. `write_payload_file` writes them atomically; the file is generated at
run time (under bench/.work/) and never committed.
"""
import os
import random
import time
from pathlib import Path

SERVICES = ["checkout", "cart", "payments", "search", "catalog", "accounts", "auth",
            "shipping", "inventory", "recommendations", "notifications", "gateway"]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1"]
LEVELS = [("INFO", 70), ("DEBUG", 15), ("WARN", 10), ("ERROR", 5)]
METHODS = [("GET", 60), ("POST", 25), ("PUT", 8), ("DELETE", 5), ("PATCH", 2)]
PATHS = ["/api/v2/orders/{id}", "/api/v2/orders", "/api/v2/carts/{id}/items",
         "/api/v1/products/{id}", "/api/v1/products", "/api/v1/search",
         "/api/v2/users/{id}/profile", "/api/v2/payments/{id}/capture", "/healthz",
         "/api/v1/shipments/{id}/tracking", "/api/v2/sessions", "/api/v1/inventory/{id}"]
STATUSES = [(200, 78), (201, 6), (204, 3), (304, 3), (400, 3), (401, 2), (404, 3),
            (409, 1), (500, 1)]
AGENTS = ["Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
          "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
          "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
          "okhttp/4.12.0", "python-requests/2.32.3", "Go-http-client/2.0", "curl/8.8.0"]
WORDS = """the a to of and in for is on with request user order from by at as was not
be this that it an are or service failed completed received sent retry retrying after
before timeout connection database query cache hit miss upstream downstream response
latency slow fast item items cart checkout payment payments authorized declined captured
refund shipment shipped delivered address customer session token expired refreshed valid
invalid missing field value null empty duplicate key index table row rows updated inserted
deleted created scheduled job worker queue message messages consumed produced partition
offset lag commit committed rebalance member group heartbeat leader replica sync pool
thread blocked waiting acquired released lock mutex memory heap allocated freed buffer
bytes size limit exceeded rate throttled backoff circuit breaker open closed half state
transition config reload loaded file path not found permission denied error warning
exception stack trace caused handler route endpoint method status code header body json
parse serialized deserialized schema version migration feature flag enabled disabled
experiment variant price discount coupon applied tax total currency amount balance
inventory stock reserved available warehouse region zone node host pod container
restart started stopped healthy unhealthy probe readiness liveness metrics exported
span trace sampled dropped batch flushed""".split()


def _weighted(rng, pairs):
    values, weights = zip(*pairs)
    return rng.choices(values, weights=weights)[0]


def text_payloads(count: int, size: int, seed: int = 20261130):
    """`count` distinct JSON-log-event lines of exactly `size` ASCII bytes (no newlines)."""
    rng = random.Random(seed)
    # Zipf-like word frequencies, as in natural text.
    cum, total = [], 0.0
    for i in range(len(WORDS)):
        total += 1.0 / (i + 1)
        cum.append(total)
    ts = 1_764_500_000_000  # ms; events a few ms apart
    lines = []
    for _ in range(count):
        ts += rng.randrange(0, 40)
        svc = rng.choice(SERVICES)
        path = rng.choice(PATHS).replace("{id}", str(rng.randrange(1, 5_000_000)))
        sec, ms = divmod(ts, 1000)
        head = (
            f'{{"ts":"{time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))}.{ms:03d}Z","level":"{_weighted(rng, LEVELS)}",'
            f'"service":"{svc}","host":"{svc}-{rng.randrange(1, 41):02d}.{rng.choice(REGIONS)}'
            f'.internal","pid":{rng.randrange(1000, 65000)},'
            f'"trace_id":"{rng.getrandbits(128):032x}","span_id":"{rng.getrandbits(64):016x}",'
            f'"user_id":"u-{rng.randrange(1, 2_000_000)}","method":"{_weighted(rng, METHODS)}",'
            f'"path":"{path}","status":{_weighted(rng, STATUSES)},'
            f'"duration_ms":{rng.lognormvariate(3.0, 1.0):.3f},'
            f'"bytes_out":{rng.randrange(120, 90_000)},'
            f'"client_ip":"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",'
            f'"user_agent":"{rng.choice(AGENTS)}","msg":"')
        tail = '"}'
        room = size - len(head) - len(tail)
        if room < 0:
            raise ValueError(f"record size {size} is too small for a log event")
        msg = ""
        while len(msg) < room:
            words = rng.choices(WORDS, cum_weights=cum, k=room // 5 + 8)
            for i in range(0, len(words), 12):  # now and then a key=value token
                words[i] = f"{words[i]}={rng.randrange(0, 100_000)}"
            msg = (msg + " " + " ".join(words)) if msg else " ".join(words)
        lines.append(head + msg[:room] + tail)
    return lines


def write_payload_file(path: Path, count: int, size: int, seed: int = 20261130) -> Path:
    """Writes text_payloads(count, size, seed) one per line (atomic rename) unless a file
    with exactly that content is already there. Returns path."""
    path = Path(path)
    lines = text_payloads(count, size, seed)
    data = ("\n".join(lines) + "\n").encode("ascii")
    if path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
