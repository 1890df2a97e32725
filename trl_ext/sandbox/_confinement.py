"""How a process confines itself before a program's first instruction, one source for the landlock launcher
(``_landlock_launcher.py``) and the fork server's children (``_forkserver_main.py``). The trainer imports only
``runs_ceiling`` (``admission.py``); its source goes in front of theirs (``base.confined_source``), and the whole runs with ``python -I -S -c`` (launcher) or ``-sP [-S]`` (fork server) inside the sandbox,
with the standard library and the Landlock bindings only.

``_import_bindings`` (landlockpy, with the C libraries the trainer found), ``_drop_root`` (to the run's uid,
no capability left), ``_drop_capabilities`` (every set emptied), ``_landlock`` (the domain:
read the system and Python directories, write one directory and /dev/null, no TCP, signals and abstract unix
sockets scoped), ``_own_user_namespace`` (a non-root run's process budget of its own), ``_fork_retrying`` (the fork server's fork of a child)
and ``_seccomp`` (the filter of ``trl_ext.sandbox.seccomp``, compiled by the trainer).
"""

import ctypes
import os
import resource
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_CAPABILITY_VERSION_3 = 0x20080522
_CLONE_NEWUSER, _PR_CAPBSET_READ, _PR_CAPBSET_DROP = 0x10000000, 23, 24
_TRAINER_RESERVE = (
    16  # processes/threads of the uid that runs together can never take (at least; a quarter of the limit)
)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + os.strerror(err))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _import_bindings(import_paths, libraries):
    """Import landlockpy from ``import_paths`` (taken off ``sys.path`` again). Both bindings look their C libraries
    up with ctypes.util.find_library at import, which runs ldconfig (and imports subprocess): the trainer resolved
    them once (``libraries``); landlockpy's test helpers (slow imports) are never loaded."""
    global landlockpy, AccessFS, AccessNet, Scope
    util = type(sys)("ctypes.util")
    util.find_library = libraries.get
    sys.modules["ctypes.util"] = ctypes.util = util
    sys.modules["landlockpy.testing"] = type(sys)("landlockpy.testing")
    sys.path[:0] = import_paths
    try:
        import landlockpy
        from landlockpy import AccessFS, AccessNet, Scope
    finally:
        del sys.path[: len(import_paths)]


def _capset(bits):
    """capset(2) by hand: no maintained pure-Python binding of libcap installs for any interpreter (python-prctl
    needs a C build against libcap headers), and this is one plain syscall."""
    data = (_CapData * 2)(_CapData(bits, bits, bits), _CapData(0, 0, 0))
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), data), "capset")


def _drop_root(uid):
    """Every uid and gid to ``uid``; every capability goes (a Python installation under a directory others cannot
    search is reached through a descriptor opened as root: ``held_roots.py``)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _capset(0)
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise RuntimeError("could not drop root privileges")


def _drop_capabilities():
    """No capability left in any set (the ambient set goes with the permitted one; changing uids leaves the
    inheritable set)."""
    _capset(0)


def _own_user_namespace():
    """A user namespace of this process's own, for a run as a non-root uid: the kernel (>= 5.14) counts
    RLIMIT_NPROC per (user namespace, uid) and checks every level up to the initial namespace, so a limit set after
    this is the run's own budget, which no sibling run of the same uid can use up (the levels above stay bounded by
    the limit in force here, before the run's own is set). No uid is mapped (the run sees the overflow uid; files
    and signals still go by the real uid), so setgroups() is refused in it. Every capability the namespace gives
    (all of them, inside it only: the kernel checks the RLIMIT_NPROC bypass in the initial namespace) is dropped at
    once, the bounding set first; seccomp then refuses any further namespace. The level above is checked against
    the limit in force at ``unshare``, for all runs and the trainer's uid together: it is lowered first by a reserve
    (``runs_ceiling``), so the runs together can never take the trainer's, its fork servers' and evaluation
    workers' last processes (outside red team, round 7: four runs of 31 filled a uid limited to 150)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NPROC, (runs_ceiling(soft), hard))
    _check(_libc.unshare(_CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    cap = 0
    while _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:  # EINVAL past the kernel's last capability
        cap += 1
    if cap == 0 or _libc.prctl(_PR_CAPBSET_READ, 0, 0, 0, 0) != 0:
        raise RuntimeError("could not empty the capability bounding set")
    _capset(0)


def runs_ceiling(limit):
    """The uid's process count that all non-root runs together may reach: the trainer's RLIMIT_NPROC ``limit``
    less a reserve of a quarter of it, at least ``_TRAINER_RESERVE``."""
    return max(0, limit - max(_TRAINER_RESERVE, limit // 4))


def _fork_retrying(tries=50, wait_s=0.02):
    """``os.fork()``, retried for about a second while the uid's process count is at its limit (EAGAIN: a run
    past its ``nproc`` for a moment, before its watcher kills it). None when it stays refused (the caller gives
    that request up: the trainer then retries on a fresh server, else ``infra_error``), never a run's failure."""
    for _ in range(tries):
        try:
            return os.fork()
        except BlockingIOError:
            _libc.usleep(int(wait_s * 1e6))
    return None


def _landlock(read_only, writable, min_abi, enforce=True):
    """A Landlock domain: read/execute ``read_only`` (files: no directory rights), read/write ``writable`` and
    /dev/null, nothing else (no /proc), no TCP bind/connect, signals and abstract unix sockets scoped to this domain
    (ABI >= 6). Also sets NO_NEW_PRIVS. ``enforce=False`` builds the ruleset and closes it unenforced (a fork
    server's warm-up: ``_forkserver_main._warm_landlock``)."""
    abi = landlockpy.abi_version()
    if abi < min_abi:
        raise RuntimeError("Landlock ABI " + str(abi) + " < " + str(min_abi))
    read = AccessFS.READ_FILE | AccessFS.READ_DIR | AccessFS.EXECUTE
    with landlockpy.Ruleset(
        handled_fs=landlockpy.fs_for_abi(abi),
        handled_net=AccessNet.BIND_TCP | AccessNet.CONNECT_TCP,
        scoped=Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL,
    ) as ruleset:
        for path in read_only:
            if os.path.exists(path):
                ruleset.allow_path(path, read if os.path.isdir(path) else read & ~AccessFS.READ_DIR)
        ruleset.allow_path(os.devnull, AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE)
        ruleset.allow_path(writable, landlockpy.fs_for_abi(abi) & ~AccessFS.IOCTL_DEV)
        if enforce:
            ruleset.restrict()


def _seccomp(filter_bytes):
    """Load the run's filter (classic BPF, compiled once by the trainer: ``trl_ext.sandbox.seccomp``)."""
    program = ctypes.create_string_buffer(filter_bytes)
    fprog = _SockFprog(len(filter_bytes) // 8, ctypes.cast(program, ctypes.c_void_p))
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp filter")
