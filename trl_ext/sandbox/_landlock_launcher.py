"""Launcher of the landlock backend: confines itself, then becomes the harness (its source goes to ``python -I -c``).

Runs (behind ``_confinement.py``'s source) with the trainer's own interpreter and the directory of ``landlockpy``,
as the leader of a fresh session, started by the parent with the scrubbed environment and the per-run scratch
directory as cwd.
argv: [config JSON, "--", harness argv...]. Steps, in order:
  0. as root, where the parent made one: move itself into the run's memory cgroup (``cgroup_procs``);
  1. report its pid (the run's session id) on ``pid_fd``: the parent kills every process of that session at the
     end; seccomp denies setsid(), so no descendant can leave the session, whatever process group it moves to;
  2. PR_SET_CHILD_SUBREAPER: orphans of the program stay children of the harness while it runs;
  3. as root: drop to the run's unprivileged uid with no capability (per-run RLIMIT_NPROC, and no root-owned
     file or process is reachable); where the Python installation sits under a directory other users cannot search
     (/root/.pyenv), the parent hands that directory over as a descriptor, named through /proc/self/fd
     (``held_roots.py``);
     as non-root, where the trainer found user namespaces usable (``userns.available``): a user namespace of its
     own (``_own_user_namespace``: the run's RLIMIT_NPROC budget is its own), every capability dropped;
  4. Landlock: read/execute on the system and Python directories, read/write on the scratch directory and
     /dev/null, nothing else (so no /proc: the parent's /proc/<pid>/environ is out of reach); TCP bind/connect
     denied (ABI >= 4); signals and abstract unix sockets scoped to the run (ABI >= 6);
  5. seccomp: the filter of ``trl_ext.sandbox.seccomp``, compiled once by the parent and read from
     ``seccomp_fd`` (the same filter as under bubblewrap): no socket() at all (socketpair() stays), no syscall on a
     process outside the run, no namespaces/mount/setsid, no io_uring, keyrings, bpf, perf, modules;
  6. exec the harness (NO_NEW_PRIVS is set by step 4, inherited by every descendant, as are steps 4 and 5).
"""

# ruff: noqa: F821 - names defined by _confinement.py, whose source runs first
import json
import os
import sys

# ``_confinement.py``'s source comes first (``base.confined_source``): _import_bindings, _drop_root, _landlock,
# _seccomp, _check, _libc and the prctl constants are defined there.
_CONFIG = json.loads(sys.argv[1])
_import_bindings(_CONFIG["import_paths"], _CONFIG["libraries"])


def _install_seccomp(fd):
    """Load the run's filter, compiled once by the parent (``trl_ext.sandbox.seccomp``), from ``fd``."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    _seccomp(b"".join(chunks))


def main():
    config, harness = _CONFIG, sys.argv[3:]
    if config.get("cgroup_procs"):  # the run's memory cgroup: everything started from here on is charged to it
        with open(config["cgroup_procs"], "w") as procs:
            procs.write(str(os.getpid()))
    os.write(config["pid_fd"], str(os.getpid()).encode())
    os.close(config["pid_fd"])
    _check(_libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    if config["uid"] is not None:
        _drop_root(config["uid"])
    elif config.get("user_namespace"):
        _own_user_namespace()
    _landlock(config["read_only"], config["scratch"], config["min_abi"])
    if config["held_filter"]:  # the held roots' descriptors stay in place (``held_roots.py``)
        _seccomp(bytes.fromhex(config["held_filter"]))
    _install_seccomp(config["seccomp_fd"])
    os.execve(harness[0], harness, {**os.environ, **config["held_env"]})


main()
