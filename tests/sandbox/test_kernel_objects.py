"""Class 6, kernel objects no memory bound counts (outside red team, round 8): byte-range locks and Landlock
rulesets are refused to runs, on every backend (bwrap, landlock, remote -> sandbox-serve; landlock as uid 1000
through ``tests/sandbox/test_container_landlock.py``)."""

import errno
import json
import os

from trl_ext.sandbox import Limits, run

from .._backends import EACH_BACKEND, sandbox_backend, sandbox_server  # noqa: F401

LIMITS = Limits(timeout_s=10.0)

_LOCKS = """
import fcntl, json, os, sqlite3, struct
out = {}
fd = os.open("data", os.O_RDWR | os.O_CREAT)
os.write(fd, b"x" * 4096)
whole = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0)
for name in ("F_SETLK", "F_SETLKW", "F_OFD_SETLK", "F_OFD_SETLKW"):
    try:
        fcntl.fcntl(fd, getattr(fcntl, name), whole)
        out[name] = 0
    except OSError as e:
        out[name] = e.errno
taken = 0
for offset in range(0, 20000, 2):  # what held 1 M kernel records per run before: every other byte, never merged
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 4096 - offset)
        taken += 1
    except OSError as e:
        out["lockf"] = e.errno
out["taken"] = taken
query = fcntl.fcntl(fd, fcntl.F_GETLK, whole)
out["getlk"] = struct.unpack("hhqqi", query)[0] == fcntl.F_UNLCK
ofd = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0)
out["ofd_getlk"] = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_OFD_GETLK, ofd))[0] == fcntl.F_UNLCK
try:  # a lock on a file every run may open passed bits between concurrent runs (red team round 10)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    out["flock"] = 0
except OSError as e:
    out["flock"] = e.errno
try:  # the channel's own route: a shared lock on a file of the Python installation
    fcntl.flock(os.open(os.__file__, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)
    out["flock_shared_file"] = 0
except OSError as e:
    out["flock_shared_file"] = e.errno
db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
db.execute("insert into t values (42)")
out["memory_db"] = db.execute("select x from t").fetchone()[0]
try:
    on_disk = sqlite3.connect("file.db")
    on_disk.execute("create table t (x)")
    on_disk.commit()
    out["file_db"] = "ok"
except sqlite3.Error as e:
    out["file_db"] = type(e).__name__
print(json.dumps(out))
"""


@EACH_BACKEND
def test_byte_range_locks_and_flock_are_refused_and_queries_and_memory_databases_work():
    # Each POSIX/OFD lock is a kernel record charged to no memory cgroup and no process: 1 M of them held 200 MiB
    # of unreclaimable memory against a 128 MiB bound, status ok, on every backend.
    result = run(_LOCKS, limits=LIMITS)
    assert result.status == "ok", result.stderr
    got = json.loads(result.stdout)
    assert {name: got[name] for name in ("F_SETLK", "F_SETLKW", "F_OFD_SETLK", "F_OFD_SETLKW")} == dict.fromkeys(
        ("F_SETLK", "F_SETLKW", "F_OFD_SETLK", "F_OFD_SETLKW"), errno.EPERM
    )
    assert (got["taken"], got["lockf"]) == (0, errno.EPERM)
    assert (
        got["getlk"] is True and got["ofd_getlk"] is True and got["flock"] == got["flock_shared_file"] == errno.EPERM
    )
    assert got["memory_db"] == 42
    assert got["file_db"] == "OperationalError"  # sqlite3 on a file needs byte-range locks (docs/sandbox.md)


_LANDLOCK = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    return ctypes.get_errno() if result == -1 else 0
attr = (ctypes.c_uint64 * 3)(1, 0, 0)  # handled_access_fs = EXECUTE: a valid ruleset, were it allowed
print(json.dumps({
    "version": call(444, 0, 0, 1),  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    "create": call(444, ctypes.addressof(attr), 24, 0),
    "add_rule": call(445, -1, 1, 0, 0),
    "restrict_self": call(446, -1, 0),
}))
"""


@EACH_BACKEND
def test_landlock_syscalls_are_refused_to_programs():
    # Rulesets and rules are kernel memory: without a memory cgroup (every non-root backend) 6 children building
    # rulesets held +121 MiB of unreclaimable memory in 60 s against a 128 MiB bound, and only the CPU rate kept
    # them under it. The run's own domain is enforced before the filter is loaded, so nothing needs them.
    result = run(_LANDLOCK, limits=LIMITS)
    assert result.status == "ok", result.stderr
    got = json.loads(result.stdout)
    assert got == dict.fromkeys(("version", "create", "add_rule", "restrict_self"), errno.EPERM)


_EPOLL = """
import asyncio, ctypes, json, os, selectors
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
async def echo():
    r, w = os.pipe()
    loop = asyncio.get_running_loop()
    got = loop.create_future()
    loop.add_reader(r, lambda: got.done() or got.set_result(os.read(r, 5)))
    os.write(w, b"hello")
    return (await asyncio.wait_for(got, 5)).decode()
def waited():
    r, w = os.pipe()
    os.write(w, b"x")
    with selectors.DefaultSelector() as selector:
        selector.register(r, selectors.EVENT_READ)
        return [key.fd for key, _ in selector.select(5)] == [r]
try:
    echoed = asyncio.run(echo())
except OSError as e:
    echoed = type(e).__name__
ctypes.set_errno(0)
made = libc.syscall(ctypes.c_long(291), ctypes.c_long(0))  # epoll_create1(0), past Python's select module
print(json.dumps({
    "epoll_create1": ctypes.get_errno() if made == -1 else 0,
    "selector": type(selectors.DefaultSelector()).__name__,
    "waited": waited(),
    "asyncio": echoed,
}))
"""


@EACH_BACKEND
def test_epoll_only_where_each_run_has_its_own_uid_and_selectors_work_everywhere():
    # Epoll watches are a per-uid kernel budget: behind a non-root sandbox-serve one run's 6 M watches made every
    # epoll_ctl of the uid fail (the service dropped every new connection). Where runs share the uid they get no
    # epoll instance; selectors (and asyncio, where socketpair is allowed) fall back to poll.
    result = run(_EPOLL, limits=LIMITS)
    assert result.status == "ok", result.stderr
    got = json.loads(result.stdout)
    own_uid = os.geteuid() == 0  # root: every run has a sandbox uid of its own (the remote service runs as root here)
    expected = (0, "EpollSelector") if own_uid else (errno.EPERM, "PollSelector")
    assert (got["epoll_create1"], got["selector"], got["waited"]) == (*expected, True)
    # asyncio's loop needs socketpair, allowed only with a memory cgroup (root here; class 6): with it, it runs
    assert got["asyncio"] == ("hello" if own_uid else "PermissionError")


_PTYS = """
import os, pty
opened = []
for path in ("/dev/ptmx", "/dev/pts/ptmx"):
    try:
        os.open(path, os.O_RDWR | os.O_NOCTTY)
        opened.append(path)
    except OSError:
        pass
try:
    pty.openpty()
    opened.append("openpty")
except OSError:
    pass
print(opened)
"""


@EACH_BACKEND
def test_no_run_takes_a_pseudo_terminal_per_run_or_fork_served(monkeypatch):
    # every pty comes from the host-wide kernel.pty.max: 3071 opens by one per-run bubblewrap run left other
    # sandboxes' openpty() failing (red team round 8, F7)
    for fork_server in ("0", "1"):
        monkeypatch.setenv("TRL_EXT_SANDBOX_FORKSERVER", fork_server)
        result = run(_PTYS, limits=LIMITS)
        assert (result.status, result.stdout.strip()) == ("ok", "[]"), (fork_server, result.stderr)
