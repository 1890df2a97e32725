"""The landlock backend: namespace-free isolation for unprivileged containers (Docker/Kubernetes defaults).

Landlock (Linux >= 5.13, no privileges) + seccomp + rlimits + a session of its own per run; see
``_landlock_launcher.py`` for what the launcher does before it becomes the harness. What differs from bubblewrap,
because it needs namespaces, and how it is bounded instead:
- Processes: not in a pid namespace of their own. Every descendant stays in the run's session (setsid() is
  denied), so after the run every process of that session is SIGKILLed, repeatedly until none is left.
- Process count: RLIMIT_NPROC counts all processes of a uid. As root every run has its own uid (as with
  bubblewrap); as a non-root uid each run has a user namespace of its own where one can be created
  (``userns.py``: the kernel counts per namespace, so ``Limits.nproc`` is the run's own budget), else every run's
  limit is the uid-wide ceiling of ``admission.py`` and its watcher kills it past ``Limits.nproc`` tasks; a run
  a sibling starved (a thread or process refused) and that failed is run once more alone.
- Filesystem: the real root, with read access only to the system and Python directories, write access only to a
  fresh scratch directory (HOME, TMPDIR and cwd). No tmpfs without a mount namespace: ``Limits.scratch_mb`` is
  enforced by a watcher that kills the run when the directory grows past it (``ScratchWatch``), on top of the
  per-file RLIMIT_FSIZE.
  /proc is not readable at all, so neither the parent's nor anyone's /proc/<pid>/environ is.
- Signals: Landlock's signal scope (ABI >= 6, Linux 6.12) keeps the program from signalling anything outside its
  run; required when not root, where the trainer has the program's uid.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from trl_ext.sandbox import admission, forked_run, forkserver, memory, seccomp, userns
from trl_ext.sandbox._process import memfd_with
from trl_ext.sandbox.base import Run, SandboxUnavailable, confined_source, python_roots
from trl_ext.sandbox.held_roots import HeldRoots
from trl_ext.sandbox.limits import SAFE_ENV, Limits
from trl_ext.sandbox.reaper import kill_session
from trl_ext.sandbox.scratch import ScratchWatch, remove_scratch

_LOGGER = logging.getLogger("trl_ext.sandbox")

_LAUNCHER_SOURCE = confined_source("_landlock_launcher.py")
_READ_ONLY = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/ld.so.conf")
_ABI_NEEDED_AS_USER = 6  # signal scoping: the program has the trainer's uid


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: unavailable, or the bindings are not installed)."""
    try:
        import landlockpy
    except ImportError:
        return 0
    return landlockpy.abi_version()


def min_abi() -> int:
    return 1 if os.geteuid() == 0 else _ABI_NEEDED_AS_USER


def unavailable_reason() -> str | None:
    """Why the landlock backend cannot run here, or None."""
    try:
        import landlockpy  # noqa: F401
        import pyseccomp

        pyseccomp.system_arch()  # loads libseccomp.so.2
    except (ImportError, OSError, RuntimeError) as exc:
        return f"the landlockpy/pyseccomp bindings or libseccomp are missing ({exc}); `pip install trl-ext`"
    abi = landlock_abi()
    if abi < min_abi():
        return (
            f"the kernel's Landlock ABI is {abi}, the landlock backend needs >= {min_abi()} "
            "(Linux >= 6.12 with Landlock in the LSM list when not running as root)"
        )
    return None


def read_only_paths(python_roots: list[str]) -> list[str]:
    return [p for p in (*_READ_ONLY, *python_roots) if os.path.exists(p)]


def make_scratch(uid: int | None) -> str:
    scratch = tempfile.mkdtemp(prefix="trl-ext-landlock-")
    if uid is not None:
        os.chown(scratch, uid, uid)
    return scratch


@functools.cache
def _binding_paths() -> list[str]:
    import landlockpy

    return [str(Path(landlockpy.__file__).parent.parent)]


@functools.cache
def _libraries() -> dict[str, str | None]:
    """Where libc and libseccomp are (the launcher's bindings would otherwise run ldconfig on every run)."""
    import ctypes.util

    return {name: ctypes.util.find_library(name) for name in ("c", "seccomp")}


def own_user_namespace(run: Run) -> bool:
    """Whether ``run`` (as a non-root uid) gets a user namespace of its own: where the per-run launch can make one
    (``userns.available``), or as its fork server found (set by ``forked_run``)."""
    if os.geteuid() == 0:
        return False
    if "user_namespace" not in run.extra:
        run.extra["user_namespace"] = userns.available()
    return run.extra["user_namespace"]


def launcher_argv(config: dict, harness_args: list[str], held: HeldRoots) -> list[str]:
    """The trainer's interpreter runs the launcher (``-S`` plus the bindings' directories: site setup is slow),
    which execs the harness. Paths under a closed directory go through ``held``'s descriptors (``held_roots.py``),
    which the caller hands over."""
    config = {
        **config,
        "read_only": held.paths(config["read_only"]),
        "held_env": held.env(),
        "held_filter": held.filter().hex(),
        "import_paths": _binding_paths(),
        "libraries": _libraries(),
    }
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER_SOURCE, json.dumps(config), "--", *held.paths(harness_args)]


def env(scratch: str) -> dict[str, str]:
    return {**SAFE_ENV, "HOME": scratch, "TMPDIR": scratch}


class LandlockBackend(forked_run.ForkServedBackend):
    """Landlock + seccomp + rlimits + a session per run, for containers where bubblewrap cannot create
    namespaces (non-root, default Docker/Kubernetes seccomp profiles). See ``trl_ext.sandbox.landlock`` for what
    it isolates and how it bounds what needs namespaces (process count, pid visibility)."""

    name = "landlock"
    enters_cgroup = True  # the launcher does it first thing (no shell in between)

    @property
    def kill_all_safe(self) -> bool:
        """Landlock's signal scope (ABI >= 6) confines kill(-1) to the run's own processes."""
        return landlock_abi() >= 6

    def check_available(self) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise SandboxUnavailable(f"The landlock code sandbox cannot run here: {reason}.")

    def fork_server_command(self, server_argv: list[str], root: str) -> forkserver.ServerCommand:
        """The fork server confines itself to a Landlock domain (read the system and Python directories, write
        ``root``), in which each child makes its own."""
        return forkserver.ServerCommand(
            argv=server_argv,
            read_only=read_only_paths(python_roots()),
            hold_closed_roots=True,
            confine_self=True,
            label="landlock fork server",
        )

    def command(self, harness_args: list[str], limits: Limits, run: Run) -> list[str]:
        self.check_available()
        pid_r, pid_w = os.pipe()
        os.set_blocking(pid_r, False)
        os.set_inheritable(pid_w, True)
        run.fds.append(pid_w)
        run.extra["pid_r"] = pid_r
        memory_cap = None if run.extra.get("cgroup") else memory.total_bytes(limits)  # no cgroup: sum the session
        run.extra["watch"] = ScratchWatch(
            pid_r,
            run.scratch,
            limits.scratch_mb << 20,
            memory_cap,
            file_bytes=limits.file_size_mb << 20,
            tasks_cap=admission.tasks_cap(limits, own_user_namespace(run)),
        )
        filter_fd = memfd_with(
            seccomp.bpf(seccomp.memfd_allowed(), allow_socketpair=run.extra.get("cgroup") is not None),
            "sandbox-seccomp",
        )
        run.fds.append(filter_fd)
        roots = python_roots()
        held = HeldRoots(read_only_paths(roots), roots)
        run.fds += held.descriptors  # closed here once the launcher started
        as_root = os.geteuid() == 0
        config = {
            "pid_fd": pid_w,
            "uid": run.uid if as_root else None,
            "user_namespace": own_user_namespace(run),
            "read_only": read_only_paths(roots),
            "scratch": run.scratch,
            "min_abi": min_abi(),
            "seccomp_fd": filter_fd,
            "cgroup_procs": str(run.extra["cgroup"] / "cgroup.procs") if run.extra.get("cgroup") else None,
        }
        return launcher_argv(config, harness_args, held)

    def rlimits(self, limits: Limits, run: Run) -> dict[str, tuple[int, int]]:
        rlimits = limits.rlimits()
        if admission.shared(own_user_namespace(run)):  # the run's own bound is its watcher's (``tasks_cap``)
            ceiling = admission.ceiling()
            rlimits["RLIMIT_NPROC"] = (ceiling, ceiling)
        return rlimits

    def env(self, scratch: str | None) -> dict[str, str]:
        return env(scratch)

    def make_scratch(self, uid: int) -> str:
        return make_scratch(uid if os.geteuid() == 0 else None)

    def finish(self, run: Run) -> None:
        watch = run.extra.pop("watch", None)
        if watch is not None:
            sid = watch.stop()
            run.extra["oom"] = watch.oom
            run.extra["over_limit"] = watch.exceeded
            os.close(run.extra.pop("pid_r"))
            admission.note_run(run.scratch)
            if sid:
                kill_session(sid)

    def cleanup(self, uid: int, scratch: str | None) -> None:
        remove_scratch(scratch)
