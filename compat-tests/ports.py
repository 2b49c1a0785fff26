"""Free loopback port ranges, for the suite and the benchmarks (no pytest needed here)."""
import socket


def free_dev_cluster_base_port(offsets=(0, 100, 200), nodes=3):
    """A base port for `runnel dev-cluster --base-port`: for each offset (client ports at
    0, controllers at 100, HTTP at 200 above the base), `nodes` consecutive loopback
    ports are free at the time of the call."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + max(offsets) + nodes > 65535:
            continue
        socks = []
        try:
            for p in [base + off + i for off in offsets for i in range(nodes)]:
                t = socket.socket()
                t.bind(("127.0.0.1", p))
                socks.append(t)
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free port range")
