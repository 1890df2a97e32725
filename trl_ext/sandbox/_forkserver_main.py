"""The fork server that runs INSIDE the sandbox (its source goes to ``python -sP [-S] -c``; argv[1]: a descriptor
holding its JSON configuration). See ``forkserver.py`` for the host side and docs/sandbox.md, "Fork server".

Start-up (once): import the Landlock bindings and a few common standard modules, load the harness
(``_harness.py``) and its runtime, confine itself (landlock backend: its own Landlock domain, reading only the
system and Python directories and writing only the directory that holds the runs' scratch directories), report
"up" on the control socket. It never runs program code and never reads a payload.

Loop: a request on the control socket (one byte plus the run's socket) -> fork one child, a spare until its run
starts. The server sends the child's pid and a pidfd of it on the run's socket and, once it reaps the child, its
wait status. The child, in this order, before any program code: closes every descriptor but the run's socket (the
control socket and other runs' sockets included) and makes a session of its own; then waits on the run's socket
for the trainer's header and descriptors (sent once the trainer moved it into the run's memory cgroup), wires
stdin/stdout/stderr and closes the run's socket; becomes a child subreaper, makes a user namespace of its own
(as non-root, where the server found that children can: the run's RLIMIT_NPROC budget is its own) or drops to
the run's uid (as root), drops every capability,
enters a Landlock domain of its own (read the system and Python directories, write its scratch directory and
/dev/null, no TCP, signals and abstract unix sockets scoped to the run), installs the seccomp filter
(NO_NEW_PRIVS), applies the run's rlimits, reseeds ``random`` and runs the harness. It ends at this script's top,
where CPython ends it as it ends ``python solution.py``.
"""

# ruff: noqa: F821 - names defined by _confinement.py, whose source runs first
import _socket
import array
import contextlib
import ctypes
import gc
import io
import json
import os
import select
import socket
import sys

# ``_confinement.py``'s source comes first (``base.confined_source``): _import_bindings, _drop_root,
# _drop_capabilities, _landlock, _seccomp, _check, _libc and the prctl constants are defined there.
_CONFIG = json.loads(os.read(int(sys.argv[1]), 1 << 24))
os.close(int(sys.argv[1]))
_import_bindings(_CONFIG["import_paths"], _CONFIG["libraries"])
for _name in _CONFIG["preload"]:  # common standard modules: imported once here, free in every run
    __import__(_name)

_CLONE_NEWNS, _MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x20000, 2, 4, 0x4000, 1 << 18
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _own_mounts():
    """A mount namespace of this child's own (a spare does it ahead of its run: the copy is off the run's path),
    where nothing it mounts reaches the server or another run."""
    _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "private mounts")


def _mount_scratch(path, size, uid):
    """The run's scratch: a tmpfs capped by the kernel at ``size`` bytes (as a per-run bubblewrap's /tmp), owned
    by ``uid``, hiding what was at ``path`` (/tmp: the servers' directory, as a rule) from the run. It goes with
    the child's mount namespace, when the run's last process exits."""
    # nr_inodes: an empty file holds no block but ~1 KiB of kernel memory (400,000 held 399 MiB of slab without a
    # cgroup): one inode per 4 KiB of the cap, as the landlock watcher counts each entry (scratch.ENTRY_BYTES)
    options = "size=" + str(size) + ",nr_inodes=" + str(max(size // 4096, 64))
    options += ",mode=0700,uid=" + str(uid) + ",gid=" + str(uid)
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()), "tmpfs")


_FILTERS = {key: bytes.fromhex(value) for key, value in _CONFIG["seccomp"].items()}

_HARNESS = {"__name__": "_harness", "__builtins__": __builtins__}
exec(compile(_CONFIG["harness"], "_harness.py", "exec"), _HARNESS)
_RUNTIME = {"__name__": "_harness_runtime", "__builtins__": _HARNESS["__builtins__"]}  # its copy
exec(_HARNESS["_runtime_code"](_CONFIG["runtime"]), _RUNTIME)  # before any program: genuine builtins captured


# the Python installation's closed roots, reached through these descriptors (``held_roots.py``): every child keeps them
_HELD_FDS = {int(fd) for fd in os.environ.get("TRL_EXT_HELD_FDS", "").split(",") if fd.isdigit()}


def _keep_only(keep):
    """Close every descriptor above 2 except ``keep`` and the held roots."""
    low = 3
    for fd in sorted({*keep, *_HELD_FDS}):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _confine(header):
    _check(_libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    if header["tmpfs_bytes"]:
        uid = os.getuid() if header["uid"] is None else header["uid"]
        _mount_scratch(header["scratch"], header["tmpfs_bytes"], uid)
    if header.get("user_namespace"):  # after the mount: it needs CAP_SYS_ADMIN over the server's namespaces
        _own_user_namespace()
    if header["uid"] is not None:
        _drop_root(header["uid"])  # every capability goes, the inheritable set too
    else:
        _drop_capabilities()
    os.chdir(header["scratch"])  # as the run's uid: the directory is its own, mode 0700
    _landlock(_CONFIG["read_only"], header["scratch"], _CONFIG["min_abi"])
    if _CONFIG["held_filter"]:  # the held roots' descriptors stay in place (``held_roots.py``)
        _seccomp(bytes.fromhex(_CONFIG["held_filter"]))
    _seccomp(_FILTERS[header["seccomp"]])


def _activation(run_sock):
    """Wait for the trainer's start of the run: its header and descriptors (stdin, stdout, stderr, readiness pipe,
    payload), sent on the run's socket once this child is in the run's memory cgroup. None: never started. Read
    with the C socket type and the harness's JSON scanner: ``socket.recv_fds`` and ``json`` are Python layers over
    them whose first use in each child cost ~0.15 ms and ~35 page faults (copies of the server's pages)."""
    sock = _socket.socket(fileno=run_sock)
    try:
        message, ancillary, _, _ = sock.recvmsg(1 << 16, _socket.CMSG_LEN(5 * 4))
    finally:
        sock.detach()
    os.close(run_sock)  # the server alone reports on the run's socket
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if not message or len(fds) != 5:
        os._exit(0)
    return _HARNESS["_parse_json"](bytes.decode(message)), list(fds)


def _child(run_sock):
    """In the forked child (a spare until the trainer starts a run in it): isolate, then run the harness; never
    returns. A script's end, and whatever it raises, unwinds to this server's top (nothing in ``_serve`` or
    ``_main`` catches it), where CPython ends the process as it ends ``python solution.py`` (red team round 16)."""
    _keep_only({run_sock})  # the control socket and every other run's socket and pidfd
    os.setsid()
    if _CONFIG["private_scratch"]:
        _own_mounts()
    header, (stdin, out_w, err_w, ready_w, payload_fd) = _activation(run_sock)
    for target, fd in ((0, stdin), (1, out_w), (2, err_w)):
        os.dup2(fd, target)
    _standard_streams()
    _keep_only({ready_w, payload_fd})
    os.environ["HOME"] = os.environ["TMPDIR"] = header["scratch"]
    if "random" in sys.modules:  # a fork shares the server's state; random also reseeds at fork itself
        sys.modules["random"].seed()
    sys.argv = ["", str(payload_fd), str(ready_w), "-1"]
    harness_main, runtime = _HARNESS["_main"], _RUNTIME
    for name in ("_HARNESS", "_RUNTIME"):  # out of ``sys.modules["__main__"]``: the program's reach (R9b-1)
        del globals()[name]
    harness_main(runtime=runtime, confine=lambda: _confine(header))
    raise _SYSTEM_EXIT  # as found at start: the program may rebind builtins.SystemExit (red team round 16c, R16C-4)


def _standard_streams():
    """sys.stdin, sys.stdout, sys.stderr (and ``__stdin__``...) made over descriptors 0-2 as python's start-up makes
    them (``create_stdio``): the server's own were made over its descriptors, and what they found there (a
    ``seekable()`` answered once) is not the run's pipe (red team round 14, R14J-7: ``io.TextIOWrapper(
    sys.stdout.buffer)`` failed with "Illegal seek"). The server's objects are kept: they hold nothing to write."""
    _SERVER_STREAMS.extend((sys.stdin, sys.stdout, sys.stderr))
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        old = getattr(sys, "__" + name + "__")
        try:
            buffer = open(fd, mode + "b", -1, closefd=False)  # noqa: SIM115 - the process's stream, never closed
            buffer.raw.name = "<" + name + ">"
            line_buffering = buffer.raw.isatty() or fd == 2
            codec = (
                getattr(old, "encoding", "utf-8"),
                getattr(old, "errors", "backslashreplace" if fd == 2 else "strict"),
            )
            stream = io.TextIOWrapper(buffer, *codec, "\n", line_buffering, False)
            stream.mode = mode
        except OSError:  # no such descriptor: python's stream is None then
            stream = None
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)


_SERVER_STREAMS = []
_SYSTEM_EXIT = SystemExit


def _detach_server_sockets(ctl, children):
    """In a new child: the server's socket objects let go of their descriptors (``_keep_only`` closes them): the
    child ends as python ends, finalising what its frames held, and a server socket finalised there closed a number
    the run may have reused and warned through the program's ``warnings`` (red team round 16c, R16C-1)."""
    ctl.detach()
    for status_sock, _pidfd in children.values():
        status_sock.detach()


def _end_sessions(sids):
    """SIGKILL every process of the sessions ``sids`` (the runs': seccomp refuses setsid, so none left its run's): a
    daemon that left its run's process group outlived a trainer that was killed (red team rounds 12 and 13). Pass
    after pass over /proc until one finds no live process there: a process that forked between a listing and its
    kill is found by the next (round 14), and a kill, unlike a stop, no other process of the run can undo (round 15:
    a SIGCONT from a sibling). The zombies are left unreaped meanwhile: they count against the run's process limit,
    so a process that keeps forking soon cannot. Where this server sees no /proc (bubblewrap's: its pid namespace
    dies with it), nothing is left to do."""
    quiet = 0  # passes in a row that found nothing: a listing of /proc is no snapshot (a process forked at a
    for _ in range(2048):  # reused low pid while the scan was past it, by a parent that then exited, is missed)
        found = _session_members(sids)
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        quiet = 0 if found else quiet + 1
        if quiet == 4:
            return


def _session_members(sids):
    """The processes of the sessions ``sids`` that are not zombies."""
    members = set()
    with contextlib.suppress(OSError):
        for entry in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError, ValueError, IndexError):
                state, sid = _state_and_session("/proc/" + entry)
                if sid in sids and (state != b"Z" or _a_thread_lives("/proc/" + entry)):
                    members.add(int(entry))
    return members


def _state_and_session(path):
    with open(path + "/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()  # after the name, which may hold ')'
    return fields[0], int(fields[3])


def _a_thread_lives(path):
    """Whether a process whose main thread is a zombie lives on in another thread (its main thread called
    SYS_exit: red team round 16, R16-1, a daemon the sweep skipped; the trainer's reaper asks the same)."""
    for task in os.listdir(path + "/task"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if _state_and_session(path + "/task/" + task)[0] not in (b"Z", b"X"):
                return True
    return False


def _parent_pidfd():
    """A pidfd of the process that started this server (the trainer; under bubblewrap, its init, which dies with
    the trainer): readable once it is gone. The control socket's end of file alone is not that: the trainer's
    forked children (a DataLoader's workers, a multiprocessing pool) hold its end too (red team round 14)."""
    try:
        return os.pidfd_open(os.getppid())
    except OSError:  # a kernel without pidfds: the control socket only
        return None


def _serve(ctl, trainer):
    """Fork a child per request; report each child's pid (with a pidfd) and its wait status on its socket.
    ``trainer``: a pidfd of the trainer (or None)."""
    children = {}  # pid -> (status socket, pidfd)
    # the sessions of runs whose first process ended: what else of them lives is the trainer's to end after the
    # status it gets, and a trainer killed before it did leaves them to this server (red team round 16, R16-4). A
    # session id is its leader's pid, which no new process takes while a member of that session lives.
    ended = set()
    watched = [ctl] if trainer is None else [ctl, trainer]
    while True:
        # a short timeout: orphans adopted from the runs (no pidfd here) are reaped soon, so their uid's process
        # count is free again before the uid serves another run
        readable = select.select([*watched, *(pidfd for _, pidfd in children.values())], [], [], 0.05)[0]
        if ctl in readable or trainer in readable:
            message, fds = (b"", []) if trainer in readable else socket.recv_fds(ctl, 1 << 16, 8)[:2]
            if not message:  # the trainer is gone (or retired this server): nothing of its runs may stay
                for pid in children:
                    with contextlib.suppress(OSError):
                        os.kill(pid, 9)
                _end_sessions(set(children) | ended)
                for pid in children:  # waited for: none is left a zombie of whoever adopts it next
                    with contextlib.suppress(OSError):
                        os.waitpid(pid, 0)
                return
            elif len(fds) == 1:
                pid = _fork_retrying()  # EAGAIN: waits, then gives the request up (never a run's failure)
                if pid is None:
                    os.close(fds[0])
                    continue
                if pid == 0:
                    _detach_server_sockets(ctl, children)
                    _child(fds[0])
                pidfd = os.pidfd_open(pid)
                status_sock = socket.socket(fileno=fds[0])
                children[pid] = (status_sock, pidfd)
                with contextlib.suppress(OSError):  # the trainer gave up on it: the child exits on its own
                    socket.send_fds(status_sock, [str(pid).encode()], [pidfd])
            else:
                for fd in fds:
                    os.close(fd)
        while True:  # direct children and orphans adopted as a subreaper alike
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in children:
                ended.add(pid)
                status_sock, pidfd = children.pop(pid)
                with contextlib.suppress(OSError):
                    status_sock.send(b"s" + str(status).encode())
                status_sock.close()
                os.close(pidfd)


def _warm_landlock():
    """Build a ruleset as each child's ``_landlock`` does and close it unenforced, where the server has no domain of
    its own (bubblewrap): the flag values it combines (landlockpy makes each composite flag on first use, then
    caches it) and its look-ups are then in the server's memory, which every child inherits, instead of made again
    in each child (about 1 ms of CPU a run). A cache only: nothing is enforced here, and every child still builds
    and enforces its own domain (``_confine``)."""
    _landlock(_CONFIG["read_only"], _CONFIG["scratch_root"], 0, enforce=False)


def _user_namespaces_work():
    """Whether this server's children can each make a user namespace of their own: a child tries, in the very
    conditions of a run's (this server's Landlock domain, bubblewrap's namespaces)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if _libc.unshare(_CLONE_NEWUSER) == 0 else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _main():
    ctl = socket.socket(fileno=_CONFIG["ctl_fd"])
    trainer = _parent_pidfd()
    _check(_libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    if _CONFIG["confine_self"]:  # landlock backend: the server's own domain; each run's domain nests in it (and
        # grants no /proc: only the server reads it, to end its runs' sessions when its trainer is gone)
        _landlock([*_CONFIG["read_only"], "/proc"], _CONFIG["scratch_root"], _CONFIG["min_abi"])
    else:
        _warm_landlock()
    ctl.send(b"up+userns" if _CONFIG["user_namespaces"] and _user_namespaces_work() else b"up")
    gc.freeze()  # never collected: a child's collection (a script's end, python's) walks the program's objects only
    _serve(ctl, trainer)


if __name__ == "__main__":
    _main()
