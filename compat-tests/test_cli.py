"""The runnel binary itself: defaults with no arguments, configuration layering and
refusal of invalid configuration, one process per data dir."""
import os
import socket
import subprocess
import time

import pytest

from conftest import RunnelProcess, runnel_bin


def run_to_exit(args, env=None, cwd=None, timeout=20):
    return subprocess.run([runnel_bin()] + args, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})), cwd=cwd)


@pytest.mark.parametrize("args,env,field", [
    (["--num-partitions", "0"], {}, "num_partitions"),
    (["--listen", "not-an-address"], {}, "listen"),
    (["--advertised-listener", "nohostport"], {}, "advertised_listener"),
    ([], {"RUNNEL_LOG_RETENTION_MS": "-5"}, "log_retention_ms"),
    ([], {"RUNNEL_MIN_INSYNC_REPLICAS": "0"}, "min_insync_replicas"),
    # The data dir (given below) must be one of the log dirs.
    (["--log-dirs", "/nonexistent/a,/nonexistent/b"], {}, "log_dirs"),
    ([], {"RUNNEL_LOG_DIRS": "/nonexistent/a,,/nonexistent/b"}, "log_dirs"),
])
def test_invalid_config_is_refused_naming_the_field(tmp_path, args, env, field):
    r = run_to_exit(args + ["--data-dir", str(tmp_path / "d")], env=env)
    assert r.returncode == 2, r
    assert field in r.stderr, r.stderr
    assert "listening on" not in r.stdout


def test_invalid_yaml_is_refused(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("num_partitons: 3\n")  # misspelt key
    r = run_to_exit(["--config", str(cfg), "--data-dir", str(tmp_path / "d")])
    assert r.returncode == 2, r
    assert "num_partitons" in r.stderr, r.stderr
    assert str(cfg) in r.stderr, r.stderr


@pytest.mark.parametrize("content,words", [
    (None, ["cannot read"]),                              # no such file
    ("num_partitions: [1, 2\n", []),                      # not YAML
    ("num_partitions: many\n", []),                       # wrong type
    ("num_partitions: 0\n", ["num_partitions"]),           # invalid value
    ("http_listen: nowhere\n", ["http_listen"]),
])
def test_config_file_errors_exit_2_and_name_the_file(tmp_path, content, words):
    cfg = tmp_path / "runnel.yaml"
    if content is not None:
        cfg.write_text(content)
    r = run_to_exit(["--config", str(cfg), "--data-dir", str(tmp_path / "d")])
    assert r.returncode == 2, r
    # The first line names the file (a YAML error may follow with the offending line).
    first = r.stderr.splitlines()[0]
    assert first.startswith("runnel: ") and str(cfg) in first, r.stderr
    for w in words:
        assert w in first, r.stderr
    assert "Error:" not in r.stderr and "backtrace" not in r.stderr, r.stderr
    assert "listening on" not in r.stdout


def test_an_invalid_flag_over_a_valid_file_says_where_it_came_from(tmp_path):
    cfg = tmp_path / "runnel.yaml"
    cfg.write_text("num_partitions: 3\n")
    r = run_to_exit(["--config", str(cfg), "--num-partitions", "0", "--data-dir", str(tmp_path / "d")])
    assert r.returncode == 2, r
    assert "num_partitions" in r.stderr and "flag" in r.stderr and str(cfg) in r.stderr, r.stderr


def test_help_describes_every_flag_with_its_default_and_environment_variable():
    r = run_to_exit(["--help"])
    assert r.returncode == 0, r
    flags = [line.split()[0] for line in r.stdout.splitlines()
             if line.startswith("      --") or line.startswith("  -")]
    described = r.stdout.split("Options:")[1]
    for flag in flags:
        if flag in ("-h,", "-V,", "--help", "--version"):
            continue
        block = described.split(flag, 1)[1].split("\n      --", 1)[0]
        assert "[env: RUNNEL_" in block, (flag, block)
        assert "[default: " in block, (flag, block)


def test_yaml_env_and_flags_layer_in_that_order(tmp_path):
    cfg = tmp_path / "runnel.yaml"
    cfg.write_text("num_partitions: 3\nauto_create_topics: false\n")
    from confluent_kafka.admin import AdminClient
    # flags > env > file: env overrides the file's auto_create, the flag overrides env's partitions
    broker = RunnelProcess(tmp_path / "d", extra_args=["--config", str(cfg), "--num-partitions", "5"],
                           env={"RUNNEL_AUTO_CREATE_TOPICS": "true", "RUNNEL_NUM_PARTITIONS": "4"})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": broker.bootstrap})
        p.produce("layered", b"v")
        assert p.flush(20) == 0
        md = admin.list_topics("layered", timeout=10)
        assert len(md.topics["layered"].partitions) == 5
    finally:
        broker.kill()


def test_one_process_per_data_dir(tmp_path):
    first = RunnelProcess(tmp_path / "d")
    first.start()
    try:
        r = run_to_exit(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d")])
        assert r.returncode != 0
        assert "in use" in r.stderr, r.stderr
    finally:
        first.kill()


def test_a_busy_port_is_one_clear_line_without_a_backtrace(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_to_exit(["--listen", f"127.0.0.1:{port}", "--http-listen", "off",
                         "--data-dir", str(tmp_path / "d")], env={"RUST_BACKTRACE": "1"})
    assert r.returncode == 1, r
    errors = [line for line in r.stderr.splitlines() if line.startswith("runnel:")]
    assert errors == [f"runnel: cannot start: cannot listen on 127.0.0.1:{port}: "
                      "Address already in use (os error 98)"], r.stderr
    assert "backtrace" not in r.stderr.lower() and "Caused by" not in r.stderr, r.stderr


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_no_arguments_is_a_dev_broker_on_9092(tmp_path):
    if not port_free(9092) or not port_free(9644):
        pytest.skip("port 9092 or 9644 (HTTP) is taken on this machine")
    proc = subprocess.Popen([runnel_bin()], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on 127.0.0.1:9092" in line, line
        assert (tmp_path / "runnel-data").is_dir()
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": "127.0.0.1:9092"})
        p.produce("hello", b"world")
        assert p.flush(20) == 0
    finally:
        proc.terminate()
        assert proc.wait(20) == 0, "SIGTERM is a clean shutdown"


def test_logs_to_a_file_carry_no_escape_codes_and_json_logs_are_json(tmp_path):
    """Text logs written to a file (or `docker logs`) have no ANSI colour codes;
    --log-format json writes one JSON object per line."""
    for fmt, data in (("text", "t"), ("json", "j")):
        broker = RunnelProcess(tmp_path / data, extra_args=["--log-format", fmt])
        broker.start()
        broker.stop()
        log = broker.log_path.read_text()
        lines = [line for line in log.splitlines() if line.strip()]
        assert any("runnel broker started" in line for line in lines), log[-2000:]
        assert "\x1b[" not in log, log[-2000:]
        if fmt == "json":
            import json
            # The harness copies stdout's ready and HTTP lines into the same file.
            parsed = [json.loads(line) for line in lines
                      if not line.startswith(("runnel ready:", "runnel http:"))]
            assert any(p.get("fields", {}).get("message") == "runnel broker started" for p in parsed), parsed[-5:]
            assert all("level" in p and "timestamp" in p for p in parsed)
