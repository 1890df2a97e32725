"""Class 6 (memory): a run's memory is bounded as a total across its processes, memfds, tmpfs and pipe buffers at
2 x memory_mb: by a memory cgroup where one can be had (root), else by summing the run's processes."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trl_ext.sandbox import Limits, memory, run

from .._backends import EACH_BACKEND, current_backend, sandbox_backend, sandbox_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
LIMITS = Limits(timeout_s=4.0, memory_mb=128)
CHILDREN = """
import os, time
N, MB = {n}, {mb}
r, w = os.pipe()
for _ in range(N):
    if os.fork() == 0:
        block = bytearray(MB << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        os.write(w, b"x")
        time.sleep(30)
        os._exit(0)
got = 0
while got < N:
    got += len(os.read(r, N))
print("ALL HELD")
"""


@EACH_BACKEND
def test_children_each_allocating_stay_inside_the_total():
    """nproc-style fan-out: each child is far below RLIMIT_AS, together they are far above the bound."""
    over = run(CHILDREN.format(n=6, mb=90), limits=LIMITS)
    assert "ALL HELD" not in over.stdout
    # SandboxFusion's protocol has no memory status: through the remote backend it arrives as a failure
    assert over.status == "memory" if current_backend() != "remote" else over.status != "ok"
    within = run(CHILDREN.format(n=2, mb=40), limits=LIMITS)
    assert within.status == "ok" and within.stdout == "ALL HELD\n"


ZOMBIE_LEADERS = """
import ctypes, os, threading, time
N, MB = 6, 90
r, w = os.pipe()
for _ in range(N):
    if os.fork() == 0:
        def hold():
            time.sleep(0.3)  # the main thread has exited by now
            block = bytearray(MB << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            os.write(w, b"x")
            time.sleep(30)
        threading.Thread(target=hold).start()
        ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread alone; /proc/<pid> then shows no memory
got = 0
while got < N:
    got += len(os.read(r, N))
print("ALL HELD")
"""


@EACH_BACKEND
def test_children_whose_main_thread_exited_still_count():
    """A process whose main thread exited alone is a zombie leader: its /proc/<pid>/status, fd and maps show
    nothing of what its live threads hold, so the watcher reads a live thread's instead."""
    over = run(ZOMBIE_LEADERS, limits=LIMITS)
    assert "ALL HELD" not in over.stdout and over.status != "ok", (over.status, over.stdout)


def _zombie_leader(directory: Path) -> tuple[int, int]:
    """A child whose main thread exited, while a thread holds 32 MiB, a 1 MiB file unlinked while open and a
    64 KiB file unlinked while only mapped; (pid, wake fd)."""
    import ctypes
    import threading

    ready_r, ready_w = os.pipe()
    wake_r, wake_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(wake_w)

        def hold():
            block = bytearray(32 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            kept = os.open(directory / "open", os.O_CREAT | os.O_RDWR, 0o600)
            os.write(kept, bytes(1 << 20))
            os.unlink(directory / "open")
            mapped = os.open(directory / "mapped", os.O_CREAT | os.O_RDWR, 0o600)
            os.write(mapped, bytes(1 << 16))
            libc = ctypes.CDLL(None)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int]
            libc.mmap.argtypes += [ctypes.c_long]
            libc.mmap(None, 4096, 1, 2, mapped, 0)
            os.close(mapped)
            os.unlink(directory / "mapped")
            os.write(ready_w, b"x")
            os.read(wake_r, 1)
            os._exit(0)

        threading.Thread(target=hold).start()
        time.sleep(0.1)
        ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread alone
    os.read(ready_r, 1)
    for _ in range(500):
        if "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]:
            break
        time.sleep(0.01)
    os.close(ready_r)
    os.close(ready_w)
    os.close(wake_r)
    return pid, wake_w


def test_a_zombie_leaders_threads_are_measured(tmp_path):
    from trl_ext.sandbox import scratch

    pid, wake = _zombie_leader(tmp_path)
    try:
        assert "RssAnon" not in Path(f"/proc/{pid}/status").read_text()  # what hid it before
        resident = memory.resident_bytes([pid])
        tables = {pid: memory.descriptors(pid)}
        unlinked = scratch.deleted_open_bytes(str(tmp_path), tables)
        mapped = scratch.mapped_deleted_bytes(str(tmp_path), [pid], tables, 1 << 30)
    finally:
        os.close(wake)
        os.waitpid(pid, 0)
    assert resident >= 32 << 20 and unlinked >= 1 << 20 and mapped == 1 << 30, (resident, unlinked, mapped)


@EACH_BACKEND
def test_memfd_pages_count():
    code = (
        "import os\nfds = [os.memfd_create('x') for _ in range(60)]\n"
        "for fd in fds:\n    os.pwrite(fd, b'x' * (15 << 20), 0)\nprint('HELD')"
    )
    result = run(code, limits=LIMITS)
    assert "HELD" not in result.stdout
    if memory.available() and current_backend() != "remote":  # 900 MiB of memfd against a 256 MiB total
        assert result.status == "memory"
    code = "import os\nfd = os.memfd_create('x')\nos.pwrite(fd, b'x' * (17 << 20), 0)\nprint(os.fstat(fd).st_size)"
    big = run(code, limits=LIMITS)  # each memfd is a file: RLIMIT_FSIZE (16 MiB) caps it everywhere
    assert big.status != "ok" or int(big.stdout) <= 16 << 20


@EACH_BACKEND
def test_pipe_buffers_cannot_be_grown():
    code = "import fcntl, os\nr, w = os.pipe()\ntry:\n    fcntl.fcntl(w, 1031, 1 << 20)\nexcept OSError as e:\n    print(e.errno)"
    assert run(code, limits=LIMITS).stdout == "1\n"  # F_SETPIPE_SZ: EPERM


@pytest.mark.skipif(not memory.available(), reason="no memory cgroup here (the fallback is tested above)")
def test_run_cgroups_are_emptied_and_reused():
    parent = memory._parent()[0]
    before = {p.name for p in parent.iterdir() if p.name.startswith("run-")}
    for backend in ("bwrap", "landlock", "bwrap", "landlock"):
        run(CHILDREN.format(n=6, mb=90), backend=backend, limits=LIMITS)
    cgroups = [p for p in parent.iterdir() if p.name.startswith("run-")]
    assert len(cgroups) <= len(before) + 1  # one at a time here: one cgroup serves them all
    assert all((p / "cgroup.procs").read_text() == "" for p in cgroups)


@pytest.mark.skipif(not memory.available(), reason="no memory cgroup here (the fallback is tested above)")
def test_a_reused_cgroup_holds_each_runs_bound():
    """``memory.set_limit`` writes a cgroup's bound only when it changes (it keeps the last one written): whatever
    a cgroup served before, the kernel's file holds the bound of the run it serves now."""

    def bound(cgroup: Path) -> int:
        name = "memory.limit_in_bytes" if (cgroup / "memory.limit_in_bytes").exists() else "memory.max"
        return int((cgroup / name).read_text())

    small, large = Limits(memory_mb=128), Limits(memory_mb=512)
    cgroup = memory.create(small)
    try:
        assert bound(cgroup) == memory.total_bytes(small)
        for limits in (large, large, small, large):
            memory.set_limit(cgroup, limits)
            assert bound(cgroup) == memory.total_bytes(limits)
    finally:
        memory.release(cgroup)
    for limits in (small, small):  # emptied cgroups are reused: each still gets its run's bound
        again = memory.create(limits)
        try:
            assert bound(again) == memory.total_bytes(limits)
        finally:
            memory.release(again)


SOCKET_BUFFERS = """
import socket
try:
    socket.socketpair()
except PermissionError:
    print("REFUSED")
    raise SystemExit
held, keep = 0, []
while held < (400 << 20):
    pair = socket.socketpair()
    keep.append(pair)
    for end in pair:
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)
        end.setblocking(False)
        try:
            while True:
                held += end.send(bytes(65536))
        except OSError:
            pass
print("ALL HELD")
"""


@EACH_BACKEND
def test_socket_buffers_count_or_socketpair_is_refused():
    """Socket buffers (and memfds in flight on them) belong to no process: only a cgroup can count them, so
    without one socketpair() is refused."""
    result = run(SOCKET_BUFFERS, limits=Limits(timeout_s=8.0, memory_mb=64))
    assert "ALL HELD" not in result.stdout
    if memory.available():
        assert result.status == "memory" if current_backend() != "remote" else result.status != "ok"
    else:
        assert result.status == "ok" and result.stdout == "REFUSED\n"


PINNED_PIPES = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype, libc.syscall.restype = ctypes.c_void_p, ctypes.c_long
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
HUGE = 2 << 20
def pin(w):
    addr = libc.mmap(None, 17 * HUGE, 3, 0x22, -1, 0)
    start = (addr + HUGE - 1) // HUGE * HUGE
    libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(16 * HUGE), 14)  # MADV_HUGEPAGE
    iov = (iovec * 16)()
    for k in range(16):
        ctypes.memset(start + k * HUGE, 1, 4096)
        iov[k].base, iov[k].len = start + k * HUGE, 4096
    done = libc.syscall(278, w, iov, 16, 0)  # vmsplice: each slot pins the page it points into
    err = ctypes.get_errno()
    libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(17 * HUGE))
    return done, err
pipes = [os.pipe() for _ in range(40)]
done, err = pin(pipes[0][1])
if done < 0:
    print("REFUSED", errno.errorcode.get(err))
    raise SystemExit
for _, w in pipes[1:]:
    pin(w)
print("ALL HELD")
"""
SPLICE_TEE_SENDFILE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
r2, w2 = os.pipe()
with open("f", "wb") as f:
    f.write(b"x" * 8192)
fd = os.open("f", os.O_RDONLY)
def tee():
    if libc.syscall(276, r, w2, 1, 2) < 0:  # tee, SPLICE_F_NONBLOCK
        raise OSError(ctypes.get_errno(), "tee")
for name, call in [("splice", lambda: os.splice(fd, w, 4096)), ("sendfile", lambda: os.sendfile(w, fd, 0, 4096)),
                   ("tee", tee)]:
    try:
        call()
        print(name, "allowed")
    except OSError as exc:
        print(name, "EPERM" if exc.errno == 1 else exc.errno)
"""


@EACH_BACKEND
def test_pipes_cannot_pin_pages_outside_the_bound():
    """vmsplice of one 4 KiB piece of a transparent huge page makes a pipe slot pin the whole 2 MiB page after the
    program unmaps it: memory of no process. With a memory cgroup it is charged (the run hits its bound); without
    one vmsplice, splice, tee and sendfile are refused, so a pipe only holds the pages write() copies into it."""
    result = run(PINNED_PIPES, limits=Limits(timeout_s=8.0, memory_mb=64))
    if not memory.available():
        assert result.status == "ok" and result.stdout == "REFUSED EPERM\n"
        moved = run(SPLICE_TEE_SENDFILE, limits=LIMITS)
        assert moved.stdout == "splice EPERM\nsendfile EPERM\ntee EPERM\n", moved.stdout + moved.stderr
    elif "[never]" not in THP.read_text() if THP.exists() else False:  # 40 pipes x 32 MiB against 2 x 64 MiB
        assert "ALL HELD" not in result.stdout
        assert result.status == "memory" if current_backend() != "remote" else result.status != "ok"
    else:  # no huge pages here: 40 x 64 KiB pinned, inside the bound and charged to the run's cgroup
        assert result.status == "ok" and result.stdout == "ALL HELD\n"


MEMFD_CREATE = (
    "import os\ntry:\n    os.memfd_create('x')\n    print('created')\nexcept OSError as e:\n    print(e.errno)"
)


@EACH_BACKEND
def test_memfds_need_a_memory_cgroup():
    """A memfd is memory no RLIMIT_AS bounds until mapped: only a cgroup charges it, so without one it is refused."""
    assert run(MEMFD_CREATE, limits=LIMITS).stdout == ("created\n" if memory.available() else "1\n")


NON_DUMPABLE_MEMFDS = """
import ctypes, os, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: the trainer's uid can no longer read its descriptors
r, w = os.pipe()
for c in range(4):
    if os.fork() == 0:
        try:
            fds = [os.memfd_create("m") for _ in range(16)]
            for fd in fds:  # 16 x 16 MiB per child, never mapped
                os.pwrite(fd, b"x" * (16 << 20), 0)
            os.write(w, b"x")
        except OSError:
            os.write(w, b"e")
        time.sleep(30)
        os._exit(0)
got = b""
while len(got) < 4:
    got += os.read(r, 4)
print("ALL HELD" if got == b"xxxx" else "REFUSED")
"""


@EACH_BACKEND
def test_non_dumpable_children_holding_memfds_stay_inside_the_total():
    """1 GiB of unmapped memfds in non-dumpable children against 2 x 64 MiB: charged to the cgroup where one
    exists, else memfd_create is refused and a process whose descriptors cannot be read counts as hiding."""
    result = run(NON_DUMPABLE_MEMFDS, limits=Limits(timeout_s=10.0, memory_mb=64))
    assert "ALL HELD" not in result.stdout  # without a cgroup: refused, or killed as hiding (non-dumpable)


def as_uid_1000(code: str) -> subprocess.CompletedProcess:
    """``python -c code`` as uid 1000 in a container without user namespaces (the trainer's case under landlock);
    as it is, where this already runs as a non-root uid (the suite's own container run)."""
    if os.geteuid() != 0:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    cmd = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-user"]
    cmd += ["--disable-userns", "--uid", "1000", "--gid", "1000", "--die-with-parent", "--chdir", str(ROOT)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*cmd, sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("bwrap") is None and os.geteuid() == 0, reason="needs bwrap as root")
def test_a_process_whose_descriptors_cannot_be_read_is_unreadable():
    """``memory.descriptors`` never skips an entry it cannot read (the root cause of uncounted memfds); run as
    uid 1000 without user namespaces, where the kernel refuses a non-dumpable process's entries."""
    code = (
        "import ctypes, os, sys, time\nfrom trl_ext.sandbox import memory\n"
        "r, w = os.pipe()\npid = os.fork()\nif pid == 0:\n"
        "    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n    os.write(w, b'x')\n    time.sleep(10)\n    os._exit(0)\n"
        "os.read(r, 1)\nimport stat\nassert any(stat.S_ISFIFO(i.st_mode) for i in memory.descriptors(os.getpid()))\n"
        "try:\n    memory.descriptors(pid)\n    print('read')\nexcept memory.Unreadable:\n    print('unreadable')\n"
        "os.kill(pid, 9)\nos.waitpid(pid, 0)\nassert memory.descriptors(pid) == []\n"
    )
    done = as_uid_1000(code)
    assert done.stdout == "unreadable\n", done.stderr
