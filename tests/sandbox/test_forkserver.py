"""The fork servers (docs/sandbox.md, "Fork server"): what one run can do to the server and to other runs, what
survives from one run to the next, and what happens when a server dies or is replaced."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trl_ext.sandbox import Limits, forkserver, get_backend, run
from trl_ext.sandbox._process import Progress

BACKENDS = ("bwrap", "landlock")


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch) -> str:
    if not forkserver.supported():
        pytest.fail("this kernel lacks Landlock ABI >= 6: fork servers are not used here")
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "1")
    get_backend(request.param)  # raises SandboxUnavailable where the backend cannot run
    yield request.param
    forkserver.close_all()  # no server outlives the test (later suites count the trainer's bwrap children)


def _servers(backend: str) -> list[forkserver.ForkServer]:
    return [server for key, server in forkserver._SERVERS.items() if key[0] == backend and not key[-1]]


def _server(backend: str) -> forkserver.ForkServer:
    (server,) = _servers(backend)
    return server


def _server_pid(backend: str) -> int:
    """The host pid of the interpreter that forks the runs (under bubblewrap, not bwrap itself)."""
    server = _server(backend)
    spare = server.take()
    try:
        return int(Path(f"/proc/{spare.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    finally:
        spare.discard()


def test_runs_go_through_a_fork_server_by_default_and_the_per_run_path_when_switched_off(backend, monkeypatch):
    forkserver.close_all()
    monkeypatch.delenv(forkserver.FORKSERVER_ENV)
    assert run("print(1)", backend=backend).stdout == "1\n"
    assert len(_servers(backend)) == 1
    forkserver.close_all()
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "0")
    assert run("print(2)", backend=backend).stdout == "2\n"
    assert _servers(backend) == []
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "maybe")
    with pytest.raises(ValueError, match=forkserver.FORKSERVER_ENV):
        run("print(3)", backend=backend)


PROBE = """
import os, sys
def kill(pid):
    try:
        os.kill(pid, 0)
        return "reached"
    except PermissionError:
        return "EPERM"
    except ProcessLookupError:
        return "ESRCH"
results = [kill(os.getppid()), kill(TARGET)]
try:
    os.listdir("/proc")
    results.append("proc")
except OSError:
    results.append("no proc")
try:
    import resource
    resource.prlimit(os.getppid(), resource.RLIMIT_CPU, (1, 1))
    results.append("relimited")
except OSError:
    results.append("no prlimit")
try:
    os.listdir(SERVERS_DIR)  # where the runs' scratch directories are made
    results.append("lists other scratch")
except OSError:
    results.append("no listing")
print(" ".join(results))
"""


def test_a_run_reaches_neither_the_server_nor_a_sibling_run(backend):
    """A sibling run is alive (it printed its pid) while the probe runs: signalling it or the server is refused,
    /proc is closed, prlimit on the server is refused, the other runs' scratch directories cannot be listed."""
    sibling: dict = {}
    done = threading.Event()

    def seen(stdout: bytes) -> bool:
        if b"\n" in stdout and "pid" not in sibling:
            sibling["pid"] = int(stdout.split(b"\n")[0])
        return done.is_set()

    progress = Progress(marker=b"never", step_s=30, stop=seen)
    # alive until the probe is done: a heartbeat on stdout lets ``seen`` stop it then (at most 20 s)
    code = "import os, sys, time\nprint(os.getpid(), flush=True)\nfor _ in range(400):\n    time.sleep(0.05)\n"
    code += "    print(end='.', flush=True)\n"
    holder = threading.Thread(
        target=lambda: sibling.update(
            result=get_backend(backend).launch(
                {"mode": "script", "code": code}, b"", Limits(timeout_s=30), progress=progress
            )
        )  # fmt: skip
    )
    holder.start()
    try:
        deadline = time.monotonic() + 30
        while "pid" not in sibling and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "pid" in sibling, "the sibling run never started"
        probe = PROBE.replace("TARGET", str(sibling["pid"])).replace("SERVERS_DIR", repr(_server(backend).root))
        probe = run(probe, backend=backend)
    finally:
        done.set()
        holder.join()
    assert probe.status == "ok", probe.stderr
    assert probe.stdout.split() == ["EPERM", "EPERM", "no", "proc", "no", "prlimit", "no", "listing"]


def test_a_run_that_corrupts_its_interpreter_leaves_the_next_run_intact(backend):
    wreck = (
        "import builtins, collections, math, sys, typing\n"
        "builtins.len = lambda x: 0\nmath.sqrt = lambda x: 42\ncollections.Counter = None\n"
        "sys.modules['typing'].List = None\nsys.path.insert(0, '/nowhere')\nprint('wrecked')\n"
    )
    assert run(wreck, backend=backend).stdout == "wrecked\n"
    check = (
        "import collections, math, sys, typing\n"
        "print(len([1, 2]), math.sqrt(4), collections.Counter('aa')['a'], typing.List[int], '/nowhere' in sys.path)"
    )
    result = run(check, backend=backend)
    assert result.stdout == "2 2.0 2 typing.List[int] False\n", result.stderr


def test_memory_exhaustion_in_one_run_does_not_reach_the_next(backend):
    hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(1 << 24))\n"
    assert run(hog, backend=backend, limits=Limits(memory_mb=256)).status in ("memory", "runtime_error")
    assert run("print(sum(range(10)))", backend=backend).stdout == "45\n"


def test_random_is_reseeded_in_every_run(backend):
    code = "import random\nprint(random.getrandbits(64))"
    seen = {run(code, backend=backend).stdout for _ in range(4)}
    assert len(seen) == 4


def test_a_server_killed_during_a_run_never_fails_the_program(backend):
    """The run is retried on a fresh server or reported as infra_error: never a runtime error or a 0."""
    run("pass", backend=backend)
    victim = _server_pid(backend)
    old = _server(backend)
    killer = threading.Timer(0.5, lambda: os.kill(victim, signal.SIGKILL))
    killer.start()
    result = run("import time\ntime.sleep(2)\nprint('done')", backend=backend)
    killer.join()
    assert result.status in ("ok", "infra_error"), (result.status, result.stderr)
    assert result.status == "infra_error" or result.stdout == "done\n"
    assert run("print(3)", backend=backend).stdout == "3\n"  # a fresh server serves the next run
    assert _server(backend) is not old


def test_a_server_is_replaced_after_its_runs_and_leaves_nothing_behind(backend, monkeypatch):
    forkserver.close_all()
    pattern = f"trl-ext-forkserver-{os.getpid()}-*"  # as PID 1 of a namespace, another process's may be there
    before = set(Path("/tmp").glob(pattern))
    monkeypatch.setattr(forkserver, "RUNS_PER_SERVER", 3)
    servers = []
    for k in range(7):
        assert run(f"print({k})", backend=backend).stdout == f"{k}\n"
        servers.append(_server(backend))
    assert len({id(s) for s in servers}) == 3
    retired = servers[0]
    assert retired.proc.poll() is not None  # stopped and waited for
    assert not Path(retired.root).exists()
    forkserver.close_all()
    assert servers[-1].proc.poll() is not None and not Path(servers[-1].root).exists()
    assert not any(Path(server.root).exists() for server in servers)
    if os.getpid() != 1:  # as PID 1 of a namespace, a concurrent PID 1 elsewhere makes directories of this pattern
        assert set(Path("/tmp").glob(pattern)) - before == set()


def test_a_run_that_changes_the_mode_of_the_servers_directory_does_not_break_the_next_run(backend):
    """As a non-root trainer every run has the trainer's uid, which owns that directory (Landlock does not govern
    chmod): the trainer sets its mode back before each run, and never raises out of a run."""
    hostile = "import os\ntry:\n    os.chmod(os.path.dirname(os.getcwd()), 0o500)\nexcept OSError:\n    pass\n"
    run(hostile, backend=backend)
    result = run("open('f', 'w').write('x')\nprint(open('f').read())", backend=backend)
    assert (result.status, result.stdout) == ("ok", "x\n")


FILL = """
import os
fs = os.statvfs(".")
print(os.getcwd(), sorted(os.listdir(".")), fs.f_blocks * fs.f_frsize >> 20, flush=True)
codes = []
for k in range(4):  # 4 processes x 30 MiB against scratch_mb=64: the kernel stops them, not a watcher's poll
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(f"f{k}", os.O_WRONLY | os.O_CREAT)
            os.posix_fallocate(fd, 0, 30 << 20)
            os._exit(0)
        except OSError:
            os._exit(1)
    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print(codes)
"""


@pytest.fixture
def bwrap_server(monkeypatch) -> str:
    if not forkserver.supported():
        pytest.fail("this kernel lacks Landlock ABI >= 6: fork servers are not used here")
    monkeypatch.delenv(forkserver.FORKSERVER_ENV, raising=False)  # the default
    get_backend("bwrap")
    yield "bwrap"
    forkserver.close_all()


def test_a_bwrap_run_gets_its_own_kernel_capped_scratch(bwrap_server):
    """Each child mounts its own tmpfs at /tmp, capped at ``scratch_mb`` as in a per-run bubblewrap: a burst of
    writes from several processes ends in ENOSPC at the cap (no watcher's poll to outrun), the run sees no other
    run's files, and what it wrote is gone for the next run."""
    limits = Limits(scratch_mb=64, file_size_mb=64)
    first = run(FILL, backend=bwrap_server, limits=limits)
    assert first.status == "ok", first.stderr
    assert first.stdout.splitlines() == ["/tmp ['solution.py'] 64", "[0, 0, 1, 1]"]
    assert _servers("bwrap")
    second = run(FILL, backend=bwrap_server, limits=limits)
    assert second.stdout.splitlines() == ["/tmp ['solution.py'] 64", "[0, 0, 1, 1]"], second.stderr


UNMOUNT = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
sets = (ctypes.c_uint32 * 6)()
assert libc.capget((ctypes.c_uint32 * 2)(0x20080522, 0), sets) == 0
print(list(sets), libc.umount2(b"/tmp", 2), libc.mount(b"none", b"/tmp", b"tmpfs", 32, b"size=1G"))
"""


def test_a_bwrap_run_keeps_no_capability_and_cannot_unmount_or_grow_its_scratch(bwrap_server):
    """The server keeps CAP_SYS_ADMIN to mount each child's tmpfs: the child drops it (and CAP_SETUID/SETGID)
    from every set before the program starts."""
    result = run(UNMOUNT, backend=bwrap_server)
    assert result.stdout == "[0, 0, 0, 0, 0, 0] -1 -1\n", result.stderr


def test_deep_nesting_in_a_bwrap_run_is_no_failure(bwrap_server):
    """The kernel caps the tmpfs, so nothing walks the scratch: nesting deeper than the watcher's limit (as in
    a per-run bubblewrap) is allowed, and the next run starts clean."""
    nest = "import os\nfor _ in range(600):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')\n"
    result = run(nest, backend=bwrap_server)
    assert (result.status, result.stdout) == ("ok", "deep\n"), result.stderr
    assert _servers("bwrap")
    assert run("import os\nprint(os.listdir('.'))", backend=bwrap_server).stdout == "['solution.py']\n"  # its own


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare, started as root")
def test_bwrap_fork_server_as_a_non_root_uid():
    """The bubblewrap tests of this module as uid 1000 (in a user namespace, where bubblewrap makes its own):
    the server's CAP_SYS_ADMIN lives in its user namespace, and each child still mounts its capped tmpfs and ends
    with no capability."""
    cmd = ["unshare", "--user", "--map-user=1000", "--map-group=1000", "--pid", "--fork", "--mount-proc"]
    cmd += [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "bwrap and not non_root"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout and "skipped" not in done.stdout
    assert int(done.stdout.split(" passed")[0].split()[-1]) >= 10
