"""The landlock suites as a REAL non-root uid (no uid mapping). The uid-1000 container of
``test_container_landlock.py`` is host root underneath: RLIMIT_NPROC never bites there, every root-owned file looks
owned by the run, and /proc entries the kernel gives to root look like the trainer's own, so an exiting process
refused to the watcher, or a lease on the trainer's own files, cannot show there. Here the suite runs under
``setpriv`` as an unprivileged uid in a private mount namespace that only makes the interpreter reachable."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.sandbox._non_root_selection import NON_ROOT_SELECTION

ROOT = Path(__file__).resolve().parents[2]
UID = 4243  # no process of the suite runs as it


def _reachable_interpreter() -> str:
    """Shell lines that, in a private mount namespace, let any uid reach ``sys.base_prefix``: the highest of its
    ancestors that others cannot search is covered by a tmpfs holding only a bind of the installation."""
    prefix = Path(sys.base_prefix).resolve()
    closed = next((p for p in reversed(prefix.parents) if p != Path("/") and not os.stat(p).st_mode & 0o001), None)
    if closed is None:
        return "true"
    keep = shlex.quote(str(prefix))
    return (
        f"mkdir -p /run/trl-ext-prefix && mount --bind {keep} /run/trl-ext-prefix && "
        f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(closed))} && mkdir -p {keep} && "
        f"mount --bind /run/trl-ext-prefix {keep}"
    )


@pytest.mark.slow
@pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
    reason="needs root, unshare and setpriv (util-linux) to become an unprivileged uid",
)
def test_the_sandbox_suites_as_a_real_unprivileged_uid():
    with tempfile.TemporaryDirectory(prefix="trl-ext-real-uid-") as home:  # pytest's own is its uid's only
        os.chmod(home, 0o777)
        done = _run_as_real_uid(home)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout and "skipped" not in done.stdout
    assert int(done.stdout.split(" passed")[0].split()[-1]) >= 60  # every selected landlock test ran


def _run_as_real_uid(home: str) -> subprocess.CompletedProcess:
    inner = (
        "exec setpriv --reuid {uid} --regid {uid} --clear-groups --inh-caps=-all --bounding-set=-all "
        "env HOME={home} TMPDIR={home} {python} -m pytest -q -p no:cacheprovider --basetemp={home}/pt tests/sandbox "
        "-k {selection}"  # the landlock tests whose paths differ as non-root (_non_root_selection.py says which)
    ).format(
        uid=UID, home=shlex.quote(home), python=shlex.quote(sys.executable), selection=shlex.quote(NON_ROOT_SELECTION)
    )
    env = {**os.environ, "TRL_EXT_TEST_BACKENDS": "landlock", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.update(PYTHONPATH=str(ROOT))
    env.pop("TRL_EXT_SANDBOX_BACKEND", None)
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{_reachable_interpreter()} && {inner}"]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
