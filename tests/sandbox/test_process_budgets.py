"""Class 5/6 as a REAL non-root uid: every run has the trainer's uid, and RLIMIT_NPROC counts a uid's processes.
Where a user namespace can be created each run makes one of its own (``trl_ext/sandbox/userns.py``), so its
``nproc`` budget is its own: a run that forks ``nproc - 1`` sleepers cannot make a concurrent sibling's right
program fail when it starts a thread (it did: "can't start new thread", score 0), and the run itself is still held
at ``nproc``. The namespace gives its creator every capability inside it: the run must hold none, and seccomp must
still refuse it any further namespace. Host root (the uid-1000 container) is never limited by RLIMIT_NPROC, so the
script runs under ``setpriv`` as an unprivileged uid, as ``test_real_uid_suite.py`` does, per run and through the
fork servers of landlock and bubblewrap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.sandbox.test_real_uid_suite import ROOT, _reachable_interpreter

UID = 4245  # no other process of the suite runs as it
NPROC = 8

SCRIPT = r'''
import json, os, sys, threading, time
from trl_ext.sandbox import Limits, run, userns
if not userns.available():
    print(json.dumps({"userns": False}))
    sys.exit(0)
NPROC = int(sys.argv[1])
HOG = """
import os, sys, time
kids = []
for _ in range(NPROC + 4):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(1)
        time.sleep(10)
        os._exit(0)
    kids.append(pid)
print(len(kids), time.time(), flush=True)
time.sleep(1.5)  # the run, and with it its children, lives on while the victim starts its thread
""".replace("NPROC", str(NPROC))
VICTIM = r"""
import ctypes, errno, threading, time
libc = ctypes.CDLL(None, use_errno=True)
data = (ctypes.c_uint32 * 6)()
assert libc.capget((ctypes.c_uint32 * 2)(0x20080522, 0), data) == 0
bounding = [cap for cap in range(64) if libc.prctl(23, cap, 0, 0, 0) == 1]  # PR_CAPBSET_READ
ambient = [cap for cap in range(64) if libc.prctl(47, 1, cap, 0, 0) == 1]  # PR_CAP_AMBIENT_IS_SET
def err(result):
    return errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "ok"
# unshare(CLONE_NEWUSER), setns, clone(CLONE_NEWUSER | SIGCHLD), clone3
print(sum(data), bounding, ambient, err(libc.unshare(0x10000000)), err(libc.setns(0, 0)),
      err(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)), err(libc.syscall(435, 0, 0)), flush=True)
time.sleep(0.6)  # the hog, launched just after this run, has forked by now
started = time.time()
out = []
t = threading.Thread(target=out.append, args=(1,)); t.start(); t.join()
print(out, started)
"""
report = {"userns": True}
for backend, fork in (("landlock", "0"), ("landlock", "1"), ("bwrap", "1")):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    limits = Limits(timeout_s=10.0, nproc=NPROC)
    for attempt in range(3):  # the hog must have forked before the victim starts its thread (a loaded machine)
        got = {}
        victim = threading.Thread(target=lambda: got.setdefault("v", run(VICTIM, limits=limits, backend=backend)))
        victim.start()
        time.sleep(0.1)
        hog = run(HOG, limits=limits, backend=backend)
        victim.join()
        forked, forked_at = (hog.stdout.split() + ["0", "0"])[:2]
        v = got["v"]
        started = float(v.stdout.split()[-1]) if v.status == "ok" and v.stdout.strip() else None  # else: failed
        if hog.status == "ok" and (started is None or float(forked_at) < started < float(forked_at) + 1.5):
            break
    caps, _, rest = v.stdout.partition("\n")
    report[backend + "-" + fork] = [caps, int(forked), v.status, (rest.split() or ["-"])[0], v.stderr.strip()[-60:]]
print(json.dumps(report))
'''


@pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv") and shutil.which("bwrap")),
    reason="needs root, unshare and setpriv (util-linux) to become an unprivileged uid, and bubblewrap",
)
def test_a_run_cannot_take_a_siblings_process_budget_and_holds_no_capability():
    report = _report_as_uid(UID, SCRIPT, str(NPROC))
    no_caps = "0 [] [] EPERM EPERM EPERM ENOSYS"  # capget, bounding, ambient; unshare, setns, clone, clone3
    for name, (caps, forked, status, out, err) in report.items():
        assert caps == no_caps, name
        assert forked == NPROC - 1, name  # the hog itself is held at its own budget
        assert (status, out) == ("ok", "[1]"), (name, err)  # the sibling's right program started its thread


RESERVE_SCRIPT = r"""
import json, os, resource, sys, threading, time
from trl_ext.sandbox import Limits, forkserver, run, userns
from trl_ext.sandbox._confinement import runs_ceiling
if not userns.available():
    print(json.dumps({"userns": False}))
    sys.exit(0)
def uid_tasks():
    count = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat("/proc/" + pid).st_uid == os.getuid():
                count += len(os.listdir("/proc/" + pid + "/task"))
        except OSError:
            pass
    return count
HOG = "import os, time\nn = 0\nwhile n < 400:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(4)\n        os._exit(0)\n    n += 1\nprint(n)\ntime.sleep(4)\n"
report = {"userns": True}
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    limit = uid_tasks() + 60  # the trainer's limit, in force when its fork server starts (the runs' ceiling comes from it)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, hard))
    run("pass", limits=Limits(timeout_s=10.0), backend="landlock")
    got = {}
    hog = threading.Thread(target=lambda: got.setdefault("hog", run(HOG, limits=Limits(timeout_s=15.0, nproc=400), backend="landlock")))
    hog.start()
    deadline = time.time() + 10
    while uid_tasks() < runs_ceiling(limit) - 2 and time.time() < deadline:
        time.sleep(0.05)
    started = 0
    for _ in range(12):  # the trainer's own threads, while the hog holds all it could get
        try:
            t = threading.Thread(target=time.sleep, args=(0.2,)); t.start(); started += 1
        except RuntimeError:
            break
    hog.join()
    resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    forkserver.close_all()
    report[fork] = [started, got["hog"].status, got["hog"].stdout.strip(), limit, runs_ceiling(limit)]
print(json.dumps(report))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
    reason="needs root, unshare and setpriv (util-linux) to become an unprivileged uid",
)
def test_runs_together_leave_the_trainer_a_reserve_of_its_uid_limit():
    """Each run's budget is its own, but the level above (the uid, all runs and the trainer together) is checked
    against the trainer's limit at the run's ``unshare``: lowered there by a reserve, a run that forks until refused
    leaves the trainer threads to start (before, it filled the uid: outside red team, round 7)."""
    report = _report_as_uid(UID + 1, RESERVE_SCRIPT)
    for fork, (started, status, forked, _limit, ceiling) in report.items():
        assert status == "ok" and 0 < int(forked) < ceiling, (fork, report)  # held below the ceiling, not at nproc
        assert started == 12, (fork, report)  # the trainer still starts its threads


def test_the_runs_ceiling_keeps_a_quarter_of_the_limit_and_at_least_sixteen():
    from trl_ext.sandbox._confinement import runs_ceiling

    assert [runs_ceiling(n) for n in (10, 40, 64, 150, 1000)] == [0, 24, 48, 113, 750]


def _report_as_uid(uid: int, script: str, *args: str) -> dict:
    """Run ``script`` as the unprivileged ``uid`` (setpriv, in a private mount namespace that makes the interpreter
    reachable) and return the JSON report on its last line; skip where no user namespace can be created."""
    with tempfile.TemporaryDirectory(prefix="trl-ext-budgets-") as home:
        os.chmod(home, 0o777)
        inner = (
            f"exec setpriv --reuid {uid} --regid {uid} --clear-groups --inh-caps=-all --bounding-set=-all "
            f"env HOME={home} TMPDIR={home} {sys.executable} -c {_quote(script)} {' '.join(args)}"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
        env.pop("TRL_EXT_SANDBOX_BACKEND", None)
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{_reachable_interpreter()} && {inner}"]
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    if not report.pop("userns"):
        pytest.skip("no user namespace can be created here: runs share the uid's headroom (documented as open)")
    return report


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


FALLBACK = """
import logging, os
from trl_ext.sandbox import Limits, run, userns
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
assert os.getuid() == 1000 and not userns.available()
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    program = "import threading; t = threading.Thread(target=print, args=(1,)); t.start(); t.join()"
    result = run(program, limits=Limits(timeout_s=10.0), backend="landlock")
    print(fork, result.status, result.stdout.strip())
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap to emulate a container")
def test_without_user_namespaces_runs_share_the_headroom_and_the_log_says_so():
    """A container without user namespaces (emulated: uid 1000, ``--disable-userns``): runs fall back to the uid's
    shared headroom, still run threaded programs, and a warning names the condition once per place."""
    cmd = ["bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--unshare-user", "--disable-userns"]
    cmd += ["--uid", "1000", "--gid", "1000", "--die-with-parent", "--chdir", str(ROOT)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([*cmd, sys.executable, "-c", FALLBACK], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["0 ok 1", "1 ok 1"]
    warnings = [line for line in done.stderr.splitlines() if "no user namespace can be created here" in line]
    assert [w.split(":")[0] for w in warnings] == [
        "WARNING sandbox (per-run launch)",
        "WARNING sandbox (landlock fork server)",
    ]


DISABLED_IN_SERVER = """
import logging, os
from trl_ext.sandbox import Limits, bwrap, forkserver, run
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = "1"
plain = bwrap.BwrapBackend.argv
for disable in (False, True):
    def argv(self, *args):
        got = plain(self, *args)
        return got[:got.index("--unshare-user") + 1] + ["--disable-userns"] * disable + got[got.index("--unshare-user") + 1:]
    bwrap.BwrapBackend.argv = argv
    forkserver.close_all()
    program = "import threading; t = threading.Thread(target=print, args=(1,)); t.start(); t.join()"
    result = run(program, limits=Limits(timeout_s=10.0), backend="bwrap")
    print(disable, result.status, result.stdout.strip())
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_bubblewrap_fork_server_finds_whether_its_children_get_namespaces():
    """Unprivileged bubblewrap (uid 1000 in a user namespace): the fork server is started without
    ``--disable-userns`` (seccomp refuses the program any namespace), so each child nests one of its own; a server
    started with it finds that its children cannot, and its runs fall back to the shared budget, logged."""
    cmd = ["bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--unshare-user"]
    cmd += ["--uid", "1000", "--gid", "1000", "--die-with-parent", "--chdir", str(ROOT)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    script = [sys.executable, "-c", DISABLED_IN_SERVER]
    done = subprocess.run([*cmd, *script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["False ok 1", "True ok 1"]
    logged = [line.split(":")[0] for line in done.stderr.splitlines() if "(bubblewrap fork server)" in line]
    assert logged == ["INFO sandbox (bubblewrap fork server)", "WARNING sandbox (bubblewrap fork server)"]


def test_a_kernel_that_counts_a_uid_across_namespaces_gets_no_namespace_per_run():
    """Before Linux 5.14 RLIMIT_NPROC counts a uid in every namespace together: ``nproc`` alone would refuse a run
    any fork there, so the per-run namespace is only used from 5.14 on."""
    from trl_ext.sandbox import userns

    got = {r: userns.counted_per_namespace(r) for r in ("5.13.19", "5.14.0", "6.18.44-fc", "4.19.0", "odd")}
    assert got == {"5.13.19": False, "5.14.0": True, "6.18.44-fc": True, "4.19.0": False, "odd": False}
