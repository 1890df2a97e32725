"""The landlock backend: namespace-free isolation for unprivileged containers (Docker/Kubernetes defaults).

Landlock (Linux >= 5.13, no privileges) + seccomp + rlimits + a session of its own per run; see
``_landlock_launcher.py`` for what the launcher does before it becomes the harness. What differs from bubblewrap,
because it needs namespaces, and how it is bounded instead:
- Processes: not in a pid namespace of their own. Every descendant stays in the run's session (setsid() is
  denied), so after the run every process of that session is SIGKILLed, repeatedly until none is left.
- Process count: RLIMIT_NPROC counts all processes of a uid. As root every run has its own uid (as with
  bubblewrap); as a non-root uid the run's limit is the uid's thread count at launch plus ``Limits.nproc``: a
  fork bomb is stopped there and killed at the deadline, but concurrent runs of the same uid share the headroom.
- Filesystem: the real root, with read access only to the system and Python directories, write access only to a
  fresh scratch directory (HOME, TMPDIR and cwd). No tmpfs without a mount namespace: ``Limits.scratch_mb`` is
  enforced by a watcher that kills the run when the directory grows past it (``ScratchWatch``), on top of the
  per-file RLIMIT_FSIZE.
  /proc is not readable at all, so neither the parent's nor anyone's /proc/<pid>/environ is.
- Signals: Landlock's signal scope (ABI >= 6, Linux 6.12) keeps the program from signalling anything outside its
  run; required when not root, where the trainer has the program's uid.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from trl_ext.sandbox.limits import SAFE_ENV, Limits

_LAUNCHER_SOURCE = (Path(__file__).parent / "_landlock_launcher.py").read_text()
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


def world_searchable(path: str) -> bool:
    """Whether every directory above ``path`` lets other users through (o+x)."""
    parts = Path(path).parts
    return all(os.stat(os.path.join(*parts[: i + 1])).st_mode & 0o001 for i in range(1, len(parts)))


def make_scratch(uid: int | None) -> str:
    scratch = tempfile.mkdtemp(prefix="trl-ext-landlock-")
    if uid is not None:
        os.chown(scratch, uid, uid)
    return scratch


@functools.cache
def _binding_paths() -> list[str]:
    import landlockpy
    import pyseccomp

    return sorted(
        {
            str(Path(module.__file__).parent.parent if module is landlockpy else Path(module.__file__).parent)
            for module in (landlockpy, pyseccomp)
        }
    )


@functools.cache
def _libraries() -> dict[str, str | None]:
    """Where libc and libseccomp are (the launcher's bindings would otherwise run ldconfig on every run)."""
    import ctypes.util

    return {name: ctypes.util.find_library(name) for name in ("c", "seccomp")}


def launcher_argv(config: dict, harness_args: list[str]) -> list[str]:
    """The trainer's interpreter runs the launcher (``-S`` plus the bindings' directories: site setup is slow),
    which execs the harness."""
    config = {**config, "import_paths": _binding_paths(), "libraries": _libraries()}
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER_SOURCE, json.dumps(config), "--", *harness_args]


def env(scratch: str) -> dict[str, str]:
    return {**SAFE_ENV, "HOME": scratch, "TMPDIR": scratch}


def _processes() -> list[tuple[int, int, str, int, int]]:
    """(pid, session id, state, threads, uid) of every process; vanished ones are skipped."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
            uid = entry.stat().st_uid
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        found.append((int(entry.name), int(fields[3]), fields[0].decode(), int(fields[17]), uid))
    return found


def nproc_limit(limits: Limits) -> int:
    """RLIMIT_NPROC for a run as a non-root uid: the uid's current threads plus the run's own budget."""
    uid = os.getuid()
    return sum(threads for _, _, _, threads, owner in _processes() if owner == uid) + limits.nproc


def kill_session(sid: int, timeout_s: float = 5.0) -> int:
    """SIGKILL every live process of session ``sid`` until none is left; returns how many were killed."""
    killed, deadline = 0, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [pid for pid, session, state, _, _ in _processes() if session == sid and state not in "ZX"]
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.001)
    return killed


class ScratchWatch:
    """Learns the run's session id from the launcher and, while the run lasts, kills the session once the scratch
    directory holds more than ``cap_bytes`` (no tmpfs of its own without a mount namespace). Polled every 20 ms,
    so a run can overshoot by what it writes in that time (bounded per file by RLIMIT_FSIZE)."""

    _POLL_S = 0.02

    def __init__(self, pid_fd: int, scratch: str, cap_bytes: int) -> None:
        self.pid_fd, self.scratch, self.cap_bytes = pid_fd, scratch, cap_bytes
        self.sid = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trl-ext-scratch-watch", daemon=True)
        self._thread.start()

    def _read_sid(self) -> None:
        if not self.sid:
            with contextlib.suppress(BlockingIOError, ValueError, OSError):
                self.sid = int(os.read(self.pid_fd, 32) or 0)

    def _watch(self) -> None:
        while not self._stop.wait(self._POLL_S):
            self._read_sid()
            if self.sid and scratch_bytes(self.scratch) > self.cap_bytes:
                kill_session(self.sid)
                return

    def stop(self) -> int:
        """Stop watching; the run's session id (0 if the launcher never reported it)."""
        self._stop.set()
        self._thread.join()
        self._read_sid()
        return self.sid


def scratch_bytes(root: str) -> int:
    """Disk space held by the files under ``root``."""
    total, stack = 0, [root]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def remove_scratch(scratch: str | None) -> None:
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
