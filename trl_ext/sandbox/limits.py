"""Resource limits and the scrubbed environment of a sandboxed run."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
import resource
import threading
from pathlib import Path

_LOGGER = logging.getLogger("trl_ext.sandbox")

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
    # one hash secret for every run, per-run sandbox or fork server: the runs of one assert evaluation replay the
    # same calls and must give the same set orders (docs/sandbox.md, "Fork server", the hash secret)
    "PYTHONHASHSEED": "0",
}
# The sandboxed interpreter's flags: -I without -E (which would ignore PYTHONHASHSEED); the environment is
# SAFE_ENV alone on every path, so no other PYTHON* variable reaches it
ISOLATED = "-sP"

# Unprivileged uids used when trl_ext runs as root (RLIMIT_NPROC does not apply to root): a block of _UID_SLOTS
# from _UID_FIRST on, inside what this user namespace maps (a container's namespace often maps only 65536 uids).
_UID_FIRST = 61000
_UID_SLOTS = 256  # runs (and evaluation workers) in flight per trainer process; more wait for a free uid
UID_BASE_ENV = "TRL_EXT_SANDBOX_UID_BASE"


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
        # queued signals are counted per uid (the trainer's, as non-root): a run queues at most this many in all
        sigpending = min(_SIGPENDING, resource.getrlimit(resource.RLIMIT_SIGPENDING)[1])
        return {
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
            "RLIMIT_AS": (self.memory_mb * mib, self.memory_mb * mib),
            "RLIMIT_FSIZE": (self.file_size_mb * mib, self.file_size_mb * mib),
            "RLIMIT_NPROC": (self.nproc, self.nproc),
            "RLIMIT_NOFILE": (self.nofile, self.nofile),
            "RLIMIT_CORE": (1, 1),  # not 0: where core_pattern pipes to a helper, only 1 makes the kernel skip it
            **_SHARED_RESOURCE_RLIMITS,
            "RLIMIT_SIGPENDING": (sigpending, sigpending),
        }


# What the kernel charges beyond a run's processes, set as low as a program can live with: locked pages (page cache
# a run mlocks is in no memory measure; a container may allow unlimited), real-time and raised priorities, and POSIX
# message queues (refused anyway by seccomp)
_SHARED_RESOURCE_RLIMITS = {
    "RLIMIT_MEMLOCK": (64 << 10, 64 << 10),
    "RLIMIT_RTPRIO": (0, 0),
    "RLIMIT_NICE": (0, 0),
    "RLIMIT_MSGQUEUE": (0, 0),
}
_SIGPENDING = 1024


def _mapped_uid_ranges(uid_map: str = "/proc/self/uid_map") -> list[range]:
    """The uids this user namespace maps (all of them where the map cannot be read)."""
    try:
        rows = [line.split() for line in Path(uid_map).read_text().splitlines()]
        return [range(int(row[0]), int(row[0]) + int(row[2])) for row in rows if len(row) == 3]
    except (OSError, ValueError):
        return [range(0, 2**32 - 1)]


def _uids_with_processes() -> set[int]:
    """Real uids of the processes this pid namespace shows."""
    owners = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                owners.add(int(Path(entry.path, "status").read_text().split("\nUid:")[1].split()[0]))
            except (OSError, IndexError, ValueError):
                continue
    return owners


def choose_uid_base(tries: int = 4096) -> int:
    """A block of ``_UID_SLOTS`` uids for this process's runs: ``TRL_EXT_SANDBOX_UID_BASE`` if set, else a block
    drawn at random from the mapped uids above ``_UID_FIRST``, avoiding blocks that visible processes already use.
    Drawn, not derived from the pid: trainers that are each their container's pid 1 share one host's uids, and
    RLIMIT_NPROC counts a uid's processes host-wide (give each a distinct base where ranges are small)."""
    if os.environ.get(UID_BASE_ENV):
        try:
            base = int(os.environ[UID_BASE_ENV])
        except ValueError:
            base = -1
        if not 1000 <= base <= 2**31 - _UID_SLOTS:
            raise ValueError(
                f"{UID_BASE_ENV}={os.environ[UID_BASE_ENV]!r}: give an integer from 1000 to 2**31 - {_UID_SLOTS}"
            )
        return base
    blocks = [
        range(max(mapped.start, _UID_FIRST), min(mapped.stop, 2**31) - _UID_SLOTS + 1, _UID_SLOTS)
        for mapped in _mapped_uid_ranges()
    ]
    blocks = [block for block in blocks if len(block)]
    if not blocks:
        return _UID_FIRST
    busy = _uids_with_processes()
    draw = random.SystemRandom()
    block = draw.choice(blocks)
    start = draw.randrange(len(block))
    for step in range(min(tries, len(block))):  # from a random block on, the first that no process uses
        base = block[(start + step) % len(block)]
        if not any(base <= uid < base + _UID_SLOTS for uid in busy):
            return base
    return block[start]


class UidPool:
    """Hands out distinct unprivileged uids to concurrent runs, so one run's fork bomb cannot use up another's
    RLIMIT_NPROC. Only used when running as root; each process draws its own block (``choose_uid_base``). When
    every uid of the block is in use, the next run waits for one (never shares: red team round 9 found runs past
    the block sharing a uid, hence its process budget and per-uid kernel quotas)."""

    def __init__(self, wait_s: float = 600.0) -> None:
        self._free_uid = threading.Condition()
        self._free = list(range(_UID_SLOTS))
        self._in_use: set[int] = set()
        self._base_uid: int | None = None
        self._warned = False
        self._wait_s = wait_s

    @property
    def _base(self) -> int:
        if self._base_uid is None:  # drawn on first use: importing trl_ext reads no /proc
            self._base_uid = choose_uid_base()
        return self._base_uid

    def acquire(self) -> int:
        """A uid of this process's block that no other run in flight holds; waits while all are held."""
        base = self._base
        with self._free_uid:
            if not self._free and not self._warned:
                self._warned = True
                _LOGGER.warning(
                    "sandbox: %d runs and evaluation workers in flight in this process hold every uid of its "
                    "block: the next runs wait for one (docs/sandbox.md, 'Sandbox uids across trainers'); run "
                    "fewer at once per process or start more trainer processes",
                    _UID_SLOTS,
                )
            if not self._free_uid.wait_for(lambda: self._free, timeout=self._wait_s):
                raise RuntimeError(f"sandbox: no uid of this process's block came free in {self._wait_s:.0f} s")
            slot = self._free.pop(0)  # FIFO: a released uid's killed processes have time to exit before reuse
            self._in_use.add(slot)
        return base + slot

    def release(self, uid: int) -> None:
        slot = uid - self._base
        with self._free_uid:
            if slot in self._in_use:
                self._in_use.discard(slot)
                self._free.append(slot)
                self._free_uid.notify()


UIDS = UidPool()
