"""Resource limits and the scrubbed environment of a sandboxed run."""

from __future__ import annotations

import dataclasses
import math
import os
import threading

# The only variables a sandboxed program sees. Set on the sandbox launcher itself (not only inside it): a
# variable cleared inside bubblewrap is still readable from the launcher's /proc/<pid>/environ.
SAFE_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

_UID_BASE = 61000  # unprivileged uids used when trl_ext runs as root (RLIMIT_NPROC does not apply to root)
_UID_SLOTS = 64


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits of one sandboxed run.

    Args:
        timeout_s: wall-clock deadline, from launch to exit (the whole process group is SIGKILLed at expiry).
        memory_mb: address-space limit (RLIMIT_AS) of every process.
        max_output_bytes: stdout cap; beyond it the run is killed with status ``"output_limit"``.
        max_stderr_bytes: stderr cap, same rule.
        file_size_mb: largest file a process may write (RLIMIT_FSIZE).
        scratch_mb: size of the writable tmpfs mounted at /tmp (the working directory).
        nproc: processes/threads the sandbox uid may hold (RLIMIT_NPROC).
        nofile: open file descriptors per process (RLIMIT_NOFILE).
        site_packages: let the program import the installed third-party packages (numpy, ...). Off by default:
            the standard library only, which also starts faster.
    """

    timeout_s: float = 5.0
    memory_mb: int = 1024
    max_output_bytes: int = 1 << 20
    max_stderr_bytes: int = 1 << 16
    file_size_mb: int = 16
    scratch_mb: int = 64
    nproc: int = 32
    nofile: int = 128
    site_packages: bool = False

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type != "bool" and not value > 0:
                raise ValueError(f"sandbox limit `{field.name}` must be > 0, got {value!r}.")

    @property
    def cpu_s(self) -> int:
        """RLIMIT_CPU in seconds: the wall deadline rounded up, plus one second of slack."""
        return math.ceil(self.timeout_s) + 1

    def rlimits(self) -> dict[str, tuple[int, int]]:
        """The rlimits the in-sandbox harness applies before running the program, as name -> (soft, hard)."""
        mib = 1 << 20
        return {
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
            "RLIMIT_AS": (self.memory_mb * mib, self.memory_mb * mib),
            "RLIMIT_FSIZE": (self.file_size_mb * mib, self.file_size_mb * mib),
            "RLIMIT_NPROC": (self.nproc, self.nproc),
            "RLIMIT_NOFILE": (self.nofile, self.nofile),
            "RLIMIT_CORE": (0, 0),
        }


class UidPool:
    """Hands out distinct unprivileged uids to concurrent runs, so one run's fork bomb cannot use up another's
    RLIMIT_NPROC. Only used when running as root; the pid offset keeps separate trainer processes apart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free = list(range(_UID_SLOTS - 1))  # the last slot is the shared overflow uid
        self._in_use: set[int] = set()
        self._base = _UID_BASE + (os.getpid() % 256) * _UID_SLOTS

    def acquire(self) -> int:
        """A uid for one run; when more runs than slots are in flight, slots are shared."""
        with self._lock:
            if not self._free:
                return self._base + _UID_SLOTS - 1
            slot = self._free.pop(0)  # FIFO: a released uid's killed processes have time to exit before reuse
            self._in_use.add(slot)
        return self._base + slot

    def release(self, uid: int) -> None:
        slot = uid - self._base
        with self._lock:
            if slot in self._in_use:
                self._in_use.discard(slot)
                self._free.append(slot)


UIDS = UidPool()
