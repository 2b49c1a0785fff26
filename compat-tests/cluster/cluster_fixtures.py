"""Fixtures shared by the cluster tests (imported by them: a second conftest.py would
shadow the suite's own `conftest` module): the franz-go helper and the runnel binary."""
import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture(scope="session")
def franz_bin():
    path = os.environ.get("FRANZ_BIN")
    if not path:
        out = subprocess.run(["bash", str(HERE.parent / "setup" / "go.sh")], capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, f"setup/go.sh failed:\n{out.stderr[-3000:]}"
        path = out.stdout.strip().splitlines()[-1]
    return path


@pytest.fixture(scope="session")
def runnel_bin():
    path = os.environ.get("RUNNEL_BIN", str(REPO / "target" / "debug" / "runnel"))
    assert Path(path).exists(), f"runnel binary not found at {path}"
    return path
