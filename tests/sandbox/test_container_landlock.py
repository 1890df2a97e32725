"""The judge-side suites on landlock as uid 1000 in a container without user namespaces (the Docker/Kubernetes
case, emulated with ``bwrap --unshare-user --disable-userns --uid 1000 --gid 1000``): there the program runs
under the trainer's own uid, so the result channel's protection (a non-dumpable harness) is what keeps it out."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sandbox._non_root_selection import NON_ROOT_SELECTION

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bwrap, started as root")
def test_judge_suites_on_landlock_as_uid_1000_without_user_namespaces():
    inner = (
        "unshare -U true 2>/dev/null && exit 3; "  # the point of this test: no new user namespace here
        # the landlock tests whose paths differ as non-root (_non_root_selection.py says which)
        f"exec python -m pytest -q -p no:cacheprovider tests/sandbox -k {shlex.quote(NON_ROOT_SELECTION)}"
    )
    cmd = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-user"]
    cmd += ["--disable-userns", "--uid", "1000", "--gid", "1000", "--die-with-parent", "--chdir", str(ROOT)]
    env = {**os.environ, "TRL_EXT_TEST_BACKENDS": "landlock", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("TRL_EXT_SANDBOX_BACKEND", None)
    done = subprocess.run([*cmd, "/bin/sh", "-c", inner], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout and "skipped" not in done.stdout
    assert int(done.stdout.split(" passed")[0].split()[-1]) >= 8  # every backend-parametrized test ran
