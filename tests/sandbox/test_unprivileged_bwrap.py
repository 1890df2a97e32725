"""Unprivileged bubblewrap: the trainer as uid 1000 in a user namespace that allows nested ones (a rootless
container where user namespaces work), so ``auto`` picks bubblewrap with no memory cgroup and a ``/dev`` that
bubblewrap builds as a tmpfs of the trainer's uid. Each test runs a small script there, per run and through
the fork server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.test_memory_bound import CHILDREN as FORKING_CHILDREN  # the same forking program

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def as_unprivileged(script: str, timeout_s: float = 120.0) -> str:
    """``script`` run by python as uid 1000 in a user namespace (nested ones allowed); its stdout."""
    cmd = ["bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--unshare-user"]
    cmd += ["--uid", "1000", "--gid", "1000", "--die-with-parent", "--chdir", str(ROOT)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRL_EXT_SANDBOX_BACKEND": "bwrap", "HF_HUB_OFFLINE": "1"}
    env.pop("TRL_EXT_SANDBOX_FORKSERVER", None)
    done = subprocess.run(
        [*cmd, sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout_s
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


WRITES = '''
import os
from trl_ext.sandbox import Limits, run
assert os.getuid() == 1000
program = """
for path in ["/dev/fill", "/dev/shm/fill", "/fill", "/usr/fill", "fill"]:
    try:
        with open(path, "w") as f:
            f.write("1")
        print("WROTE", path)
    except OSError as e:
        print("refused", path)
with open("/dev/null", "w") as f:
    f.write("devices work")
"""
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    result = run(program, limits=Limits(timeout_s=10.0))
    print(fork, result.status, result.stdout.replace("\\n", ";"))
'''


def test_a_run_writes_nowhere_but_its_scratch():
    """As non-root, ``--dev /dev`` was a writable tmpfs without size (200 MiB written with ``scratch_mb=32``)."""
    lines = as_unprivileged(WRITES).splitlines()
    refused = "refused /dev/fill;refused /dev/shm/fill;refused /fill;refused /usr/fill;WROTE fill;"
    assert lines == [f"0 ok {refused}", f"1 ok {refused}"]


CHILDREN = (
    "import os\n"
    "from trl_ext.sandbox import Limits, memory, run\n"
    "assert os.getuid() == 1000 and not memory.available()  # no memory cgroup: the run's total is polled\n"
    f"program = {FORKING_CHILDREN!r}\n"
    """
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    over = run(program.format(n=8, mb=40), limits=Limits(timeout_s=6.0, memory_mb=64))  # each under RLIMIT_AS
    under = run(program.format(n=2, mb=20), limits=Limits(timeout_s=6.0, memory_mb=64))
    print(fork, over.status, "ALL HELD" in over.stdout, under.status, under.stdout.strip())
"""
)


def test_children_each_allocating_stay_inside_the_total_without_a_cgroup():
    """Per run, nothing summed the run's processes without a memory cgroup: 12 children x 40 MiB held 795 MiB
    with ``memory_mb=64`` (bound 128 MiB), status ok. Now the watcher polls the sandbox's pid namespace."""
    per_run, forked = as_unprivileged(CHILDREN).splitlines()
    assert per_run == "0 memory False ok ALL HELD"
    assert forked.split()[0] == "1" and forked.split()[1] != "ok" and forked.endswith("False ok ALL HELD"), forked


INODES = '''
import os
from trl_ext.sandbox import Limits, run
program = """
import os
made = 0
try:
    for i in range(20_000):
        open(f"f{i}", "w").close()
        made += 1
except OSError:
    pass
print("MADE", made)
"""
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    result = run(program, limits=Limits(timeout_s=20.0, scratch_mb=16))
    print(fork, result.status, result.stdout.strip() or "-")
'''


def test_empty_files_count_against_the_scratch_without_a_cgroup():
    """A tmpfs capped in bytes holds any number of empty files, each ~1 KiB of uncounted kernel memory (400,000:
    +399 MiB of slab, status ok). Now one inode per 4 KiB of ``scratch_mb`` (16 MiB: 4,096)."""
    per_run, forked = as_unprivileged(INODES).splitlines()
    assert per_run.split()[:2] == ["0", "runtime_error"] and "MADE 20000" not in per_run, per_run
    fork, status, *made = forked.split()
    assert (fork, status, made[0]) == ("1", "ok", "MADE") and int(made[1]) <= 4096, forked
