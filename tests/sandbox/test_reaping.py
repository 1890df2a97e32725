"""Class 7: where the trainer or sandbox-serve adopts orphans (a container's PID 1 without init, or any child
subreaper), every process a run creates is reaped: programs that double-fork, leave children behind, time out, or
are graded by stdio, calls and assert tests (evaluation workers included) leave no zombie."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trl_ext.sandbox import Limits, run

PROBE = Path(__file__).with_name("_reap_probe.py")
ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
PID_1 = ["unshare", "--pid", "--fork", "--mount-proc"]
CONTAINER = ["bwrap", "--dev-bind", "/", "/", "--unshare-user", "--disable-userns", "--uid", "1000", "--gid", "1000"]
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root")


def _zombies_left(prefix: list[str], backend: str) -> str:
    done = subprocess.run(
        [*prefix, sys.executable, str(PROBE), backend], env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@needs_root
@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
@pytest.mark.parametrize("where", ["subreaper", "pid-1"])
def test_no_zombie_where_orphans_come_to_the_trainer(backend, where):
    assert _zombies_left(PID_1 if where == "pid-1" else [], backend) == "ZOMBIES 0 []"


@needs_root
def test_no_zombie_as_uid_1000_in_a_container_without_user_namespaces():
    assert _zombies_left(CONTAINER, "landlock") == "ZOMBIES 0 []"


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]


def _zombie_children(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        try:
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                found.append(child)
        except OSError:
            continue
    return found


@needs_root
def test_sandbox_serve_as_pid_1_leaves_no_zombie():
    cmd = [
        *PID_1,
        "--kill-child",
        sys.executable,
        "-m",
        "trl_ext.cli",
        "sandbox-serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    proc = subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        while url is None and (line := proc.stdout.readline()):
            url = (found := re.search(r"http://127\.0\.0\.1:\d+", line)) and found.group(0)
        assert url, "sandbox-serve did not start"
        server = _children(proc.pid)[0]  # PID 1 of the new namespace
        code = "import os, time\nif os.fork() == 0:\n    if os.fork() == 0:\n        time.sleep(30)\n    os._exit(0)\nprint(2)"
        for _ in range(3):
            assert run(code, backend="remote", sandbox_url=url, limits=Limits(timeout_s=5)).stdout == "2\n"
        time.sleep(0.5)
        assert _zombie_children(server) == []
    finally:
        proc.kill()  # --kill-child: the server with it
        proc.wait(10)
