"""Launcher of the landlock backend: confines itself, then becomes the harness (its source goes to ``python -I -c``).

Runs with the trainer's own interpreter and the directory of ``landlockpy`` as the leader of
a fresh session, started by the parent with the scrubbed environment and the per-run scratch directory as cwd.
argv: [config JSON, "--", harness argv...]. Steps, in order:
  0. as root, where the parent made one: move itself into the run's memory cgroup (``cgroup_procs``);
  1. report its pid (the run's session id) on ``pid_fd``: the parent kills every process of that session at the
     end; seccomp denies setsid(), so no descendant can leave the session, whatever process group it moves to;
  2. PR_SET_CHILD_SUBREAPER: orphans of the program stay children of the harness while it runs;
  3. as root: drop to the run's unprivileged uid (per-run RLIMIT_NPROC, and no root-owned file or process is
     reachable); where the Python installation sits under a directory other users cannot search (/root/.pyenv),
     keep CAP_DAC_READ_SEARCH as the only (ambient) capability: Landlock still limits what is readable;
  4. Landlock: read/execute on the system and Python directories, read/write on the scratch directory and
     /dev/null, nothing else (so no /proc: the parent's /proc/<pid>/environ is out of reach); TCP bind/connect
     denied (ABI >= 4); signals and abstract unix sockets scoped to the run (ABI >= 6);
  5. seccomp: the filter of ``trl_ext.sandbox.seccomp``, compiled once by the parent and read from
     ``seccomp_fd`` (the same filter as under bubblewrap): no socket() at all (socketpair() stays), no syscall on a
     process outside the run, no namespaces/mount/setsid, no io_uring, keyrings, bpf, perf, modules;
  6. exec the harness (NO_NEW_PRIVS is set by step 4, inherited by every descendant, as are steps 4 and 5).
"""

import ctypes
import json
import os
import sys

_CONFIG = json.loads(sys.argv[1])
sys.path[:0] = _CONFIG["import_paths"]  # run with -S: only the bindings' directories, not the whole site setup
# Both bindings look their C libraries up with ctypes.util.find_library at import, which runs ldconfig (and
# imports subprocess) on every run; the parent resolved them once, so the launcher answers from that instead.
_util = type(sys)("ctypes.util")
_util.find_library = _CONFIG["libraries"].get
sys.modules["ctypes.util"] = ctypes.util = _util
# landlockpy's package imports its test helpers (dataclasses, inspect: most of the launcher's start-up); unused here
sys.modules["landlockpy.testing"] = type(sys)("landlockpy.testing")

import landlockpy  # noqa: E402
from landlockpy import AccessFS, AccessNet, Scope  # noqa: E402

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_KEEPCAPS = 8
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE = 47, 2
_CAP_DAC_READ_SEARCH = 2
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _keep_only_dac_read_search():
    """capset(2) + PR_CAP_AMBIENT by hand: no maintained pure-Python binding of libcap installs for any
    interpreter (python-prctl needs a C build against libcap headers), and these are two plain syscalls."""
    bit = 1 << _CAP_DAC_READ_SEARCH
    data = (_CapData * 2)(_CapData(bit, bit, bit), _CapData(0, 0, 0))
    _check(_libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data), "capset")  # _LINUX_CAPABILITY_VERSION_3
    _check(_libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH, 0, 0), "ambient capability")


def _drop_root(uid, keep_read_search):
    if keep_read_search:
        _check(_libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0), "PR_SET_KEEPCAPS")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if keep_read_search:
        _keep_only_dac_read_search()
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise RuntimeError("could not drop root privileges")


def _restrict_filesystem_and_network(config):
    abi = landlockpy.abi_version()
    if abi < config["min_abi"]:
        raise RuntimeError(f"Landlock ABI {abi} < {config['min_abi']}")
    read = AccessFS.READ_FILE | AccessFS.READ_DIR | AccessFS.EXECUTE
    with landlockpy.Ruleset(
        handled_fs=landlockpy.fs_for_abi(abi),
        handled_net=AccessNet.BIND_TCP | AccessNet.CONNECT_TCP,
        scoped=Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL,
    ) as ruleset:
        for path in config["read_only"]:
            ruleset.allow_path(
                path, read if os.path.isdir(path) else read & ~AccessFS.READ_DIR
            )  # files: no dir rights
        ruleset.allow_path(os.devnull, AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE)
        ruleset.allow_path(config["scratch"], landlockpy.fs_for_abi(abi) & ~AccessFS.IOCTL_DEV)
        ruleset.restrict()  # also sets PR_SET_NO_NEW_PRIVS


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _install_seccomp(fd):
    """Load the run's filter, compiled once by the parent (``trl_ext.sandbox.seccomp``), from ``fd``."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    program = ctypes.create_string_buffer(b"".join(chunks))
    fprog = _SockFprog(len(program.raw) // 8, ctypes.cast(program, ctypes.c_void_p))
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp filter")


def main():
    config, harness = _CONFIG, sys.argv[3:]
    if config.get("cgroup_procs"):  # the run's memory cgroup: everything started from here on is charged to it
        with open(config["cgroup_procs"], "w") as procs:
            procs.write(str(os.getpid()))
    os.write(config["pid_fd"], str(os.getpid()).encode())
    os.close(config["pid_fd"])
    _check(_libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    if config["uid"] is not None:
        _drop_root(config["uid"], config["keep_read_search"])
    _restrict_filesystem_and_network(config)
    _install_seccomp(config["seccomp_fd"])
    os.execv(harness[0], harness)


main()
