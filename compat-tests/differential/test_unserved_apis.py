"""A request for an API the broker does not serve: Kafka 4.4 closes the connection without
an answer (only ApiVersions answers an unsupported version, see test_errors.py), for an
unknown api key, for an API its broker listener does not enable (Vote is controller-only)
and for a version it does not serve. runnel does the same."""
import socket
import struct

import pytest


def _closes_without_answer(bootstrap, api_key, version):
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        client_id = b"differential"
        # Request header v2 (flexible): api key, version, correlation id, client id, no tags.
        frame = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id + b"\x00"
        s.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            return s.recv(4) == b""
        except ConnectionResetError:
            return True


@pytest.mark.parametrize("api_key,version", [(1000, 0), (52, 0), (8, 11), (0, 99)],
                         ids=["unknown-key", "vote-controller-only", "offset-commit-v11", "produce-v99"])
def test_unserved_api_closes_the_connection(bootstrap, api_key, version):
    assert _closes_without_answer(bootstrap, api_key, version)
