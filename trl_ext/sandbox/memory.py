"""The memory bound of a run as a total: every process of it, its scratch tmpfs, memfds and pipe buffers together
stay within ``total_bytes(limits)`` = 2 x ``Limits.memory_mb`` (RLIMIT_AS bounds only one process's address space:
``nproc`` children, or memfd pages that are never mapped, escape it).

Where a memory cgroup can be had (root, cgroup v1 or v2 with the memory controller) every run gets one: the
launcher enters it before it execs (``enter_argv``), so everything the run creates is charged to it, tmpfs and
memfd pages and pipe buffers included; the kernel's OOM killer acts inside it only, and an OOM kill makes the run's
status "memory". Elsewhere (an unprivileged container) the run's processes are summed instead (``session_bytes``,
polled by ``scratch.ScratchWatch``, anonymous + shared resident memory) and the run is killed past the bound.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import itertools
import os
import threading
import time
from pathlib import Path

from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.reaper import stop_then_kill

_COUNTER = itertools.count()
_LOCK = threading.Lock()
_FREE: list[Path] = []  # empty run cgroups, reused
_FREE_FORK: list[Path] = []  # empty cgroups of fork-server children, reused
_OOM_BEFORE: dict[Path, int] = {}
_BOUND: dict[Path, str] = {}  # the bound last written whole to each cgroup: written again only when it changes


def total_bytes(limits: Limits) -> int:
    return 2 * limits.memory_mb << 20


@functools.cache
def _parent() -> tuple[Path, int] | None:
    """This process's directory for run cgroups and the cgroup version, or None where none can be made."""
    if os.geteuid() != 0:
        return None
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        own[controllers] = path
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        mount, fstype, options = fields[4], fields[fields.index("-") + 1], fields[-1]
        if fstype == "cgroup" and "memory" in options.split(","):
            found = (Path(mount), 1, next((p for c, p in own.items() if "memory" in c.split(",")), "/"))
        elif fstype == "cgroup2" and "memory" in _read(Path(mount, "cgroup.controllers")).split():
            found = (Path(mount), 2, own.get("", "/"))
        else:
            continue
        for base in (found[0] / found[2].lstrip("/"), found[0]):
            parent = base / f"trl-ext-{os.getpid()}"
            with contextlib.suppress(OSError):
                parent.mkdir(exist_ok=True)
                if found[1] == 2:
                    (parent / "cgroup.subtree_control").write_text("+memory")
                return parent, found[1]
    return None


def _read(path: Path) -> str:
    """The file's text, "" where it cannot be read (os-level: a cgroup file is read several times a run, and
    ``Path.read_text``'s buffered text layers cost more than the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def _write(path: Path, text: str) -> None:
    """Write ``text`` to a cgroup file in one ``write`` (raises ``OSError`` where the kernel refuses it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def available() -> bool:
    return _parent() is not None


def create(limits: Limits, kind: str = "run") -> Path | None:
    """A cgroup of its own bounding one run at ``total_bytes(limits)`` (empty ones are reused: making and removing
    one per run costs milliseconds), or None where none can be made. ``kind`` "fork": for a fork server's child,
    made ahead of its run (``forkserver.Spare``), kept apart from the per-run launches' ones."""
    parent = _parent()
    if parent is None:
        return None
    free = _FREE_FORK if kind == "fork" else _FREE
    with _LOCK:
        path = free.pop() if free else parent[0] / f"{kind}-{next(_COUNTER)}"
    try:
        path.mkdir(exist_ok=True)
        set_limit(path, limits)
    except OSError:
        _remove(path)
        return None
    _OOM_BEFORE[path] = _oom_kills(path)
    return path


def set_limit(cgroup: Path, limits: Limits) -> None:
    """Bound ``cgroup`` at ``total_bytes(limits)`` (a cgroup made ahead of its run gets its run's limits here).
    A reused cgroup that holds this bound already is left as it is: only the trainer writes these files (no run
    can reach the cgroup file system), so the bound written last is the one in force."""
    limit = str(total_bytes(limits))
    if _BOUND.get(cgroup) == limit:
        return
    _BOUND.pop(cgroup, None)  # unknown until every file below is written
    if _parent()[1] == 1:  # memory <= memory+swap at every step: raising, the second goes first
        with contextlib.suppress(OSError):  # absent without swap accounting; refused before a lowering
            _write(cgroup / "memory.memsw.limit_in_bytes", limit)
        _write(cgroup / "memory.limit_in_bytes", limit)
        with contextlib.suppress(OSError):
            _write(cgroup / "memory.memsw.limit_in_bytes", limit)
    else:
        _write(cgroup / "memory.max", limit)
        with contextlib.suppress(OSError):
            _write(cgroup / "memory.swap.max", "0")
    _BOUND[cgroup] = limit


def attach(cgroup: Path, pid: int) -> None:
    """Move the process ``pid`` into ``cgroup`` (raises ``OSError`` where the kernel refuses)."""
    _write(cgroup / "cgroup.procs", str(pid))


def enter_argv(cgroup: Path, argv: list[str]) -> list[str]:
    """``argv`` started inside ``cgroup``: the shell moves itself there, then execs (same pid, so the same session).
    Raises ``FileNotFoundError`` here, like a direct launch would, when ``argv[0]`` cannot be executed."""
    if not os.access(argv[0], os.X_OK):
        raise FileNotFoundError(errno.ENOENT, "cannot execute", argv[0])
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup / "cgroup.procs"), *argv]


def _oom_kills(cgroup: Path) -> int:
    text = _read(cgroup / "memory.oom_control") or _read(cgroup / "memory.events")
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("oom_kill "))


def oom_killed(cgroup: Path) -> bool:
    """Whether the kernel killed a process of the run for memory since ``create``."""
    return _oom_kills(cgroup) > _OOM_BEFORE.get(cgroup, 0)


def procs(cgroup: Path) -> list[int]:
    """The processes in ``cgroup`` (every process of the run it bounds)."""
    return [int(p) for p in _read(cgroup / "cgroup.procs").split()]


def release(cgroup: Path, timeout_s: float = 5.0) -> None:
    """Kill whatever is left in ``cgroup``; once it is empty it serves the next run. cgroup v2's ``cgroup.kill``
    (Linux >= 5.14) kills every process in it at once, a child forked meanwhile included; elsewhere they are
    stopped, then killed (``reaper.stop_then_kill``: a process that keeps forking and exiting is never where a
    sweep by pid aims)."""
    deadline = time.monotonic() + timeout_s
    _OOM_BEFORE.pop(cgroup, None)
    with contextlib.suppress(OSError):
        _write(cgroup / "cgroup.kill", "1")
    if procs(cgroup):
        # the cgroup lists its processes whole: a scan reads those, never all of /proc with a file read per process
        stop_then_kill(lambda proc: True, timeout_s, listed=lambda: procs(cgroup))
    while time.monotonic() < deadline:
        if not procs(cgroup):
            with _LOCK:
                (_FREE_FORK if cgroup.name.startswith("fork-") else _FREE).append(cgroup)
            return
        time.sleep(0.002)
    _remove(cgroup)


def _remove(cgroup: Path) -> None:
    _BOUND.pop(cgroup, None)
    with contextlib.suppress(OSError):
        cgroup.rmdir()


@atexit.register
def _remove_all() -> None:
    parent = _parent.cache_info().currsize and _parent()
    if parent:
        for path in [*_FREE, *_FREE_FORK, parent[0]]:
            _remove(path)


class Unreadable(PermissionError):
    """A process of the run whose descriptors or mappings cannot be read: it made itself non-dumpable (``prctl``,
    or exec of a file it cannot read), so what it holds (memfds, files unlinked while open or mapped) cannot be
    measured."""


def proc_dir(pid: int) -> str:
    """The /proc directory that shows ``pid``'s memory and mappings: ``/proc/<pid>``, or, once its
    main thread exited alone (``SYS_exit``) while other threads live on, a live thread's: a zombie leader shows no
    memory and no mapping of the process it still heads. Called only where ``/proc/<pid>`` shows none (a process
    that is gone or a zombie): a listing of its threads."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return f"/proc/{pid}"
    return next((f"/proc/{pid}/task/{tid}" for tid in tids if tid != str(pid)), f"/proc/{pid}")


def released(task: str) -> bool:
    """Whether the task at ``task`` (``/proc/<pid>`` or ``/proc/<pid>/task/<tid>``) has released its address space:
    it is gone, a zombie or exiting (its status shows no ``VmSize``). The kernel makes such a task's ``fd``
    directory root's (``task_dump_owner``: no mm), so a non-root trainer is refused it although nothing hides
    there: the task runs no more program code, and the descriptors it may still hold are closed in the same
    exit (``exit_files`` follows ``exit_mm``). A live task always shows ``VmSize``, dumpable or not."""
    try:
        with open(f"{task}/status", "rb") as status:
            return b"\nVmSize:" not in status.read()
    except OSError:
        return True


def descriptors(pid: int) -> list[os.stat_result]:
    """The stat of each open descriptor of every thread of ``pid`` (one ``stat`` each: no ``readlink``, a memfd is
    told by its device, ``memfd_device``); [] once it has exited. Every thread's table is read: a thread cloned
    without CLONE_FILES has a table of its own, which ``/proc/<pid>/fd`` (the main thread's) does not show, and a
    main thread that exited alone shows none. So at most ``nproc x nofile`` descriptors in all. Raises
    ``Unreadable`` where the kernel refuses them: the fd directory of a non-dumpable process of the same uid can
    still be listed, only its entries are refused, so each entry is checked (an error there is never skipped:
    skipping it once let 3 GiB of memfds go uncounted), except for a thread that has ``released`` its address
    space (exiting or a zombie: refused to a non-root trainer by the kernel, with nothing left to hide)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    except OSError as exc:
        if released(f"/proc/{pid}"):
            return []
        raise Unreadable(f"threads of process {pid}: {exc}") from exc
    found = []
    for tid in tids:
        try:
            found += _thread_descriptors(pid, f"/proc/{pid}/task/{tid}")
        except Unreadable:
            if not released(f"/proc/{pid}/task/{tid}"):
                raise
    return found


def _thread_descriptors(pid: int, task: str) -> list[os.stat_result]:
    directory = f"{task}/fd"
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []  # the thread exited
    except OSError as exc:
        raise Unreadable(f"descriptors of process {pid}: {exc}") from exc
    found = []
    for name in names:
        try:
            found.append(os.stat(f"{directory}/{name}"))
        except FileNotFoundError:
            continue  # closed meanwhile, or the thread exited
        except OSError as exc:  # EACCES: not dumpable; anything else cannot be measured either
            raise Unreadable(f"descriptors of process {pid}: {exc}") from exc
    return found


@functools.cache
def memfd_device() -> int:
    """The device every memfd of this kernel lives on (its internal shared-memory mount)."""
    fd = os.memfd_create("trl-ext-probe", os.MFD_CLOEXEC)
    try:
        return os.fstat(fd).st_dev
    finally:
        os.close(fd)


def resident_bytes(pids: list[int]) -> int:
    """Resident anonymous and shared pages (memfd and tmpfs mappings) of ``pids``: one small read per process
    (this runs every poll, for every process of the run: ~12 us each)."""
    total = 0
    for pid in pids:
        found = _resident(f"/proc/{pid}/status")
        if found is None:  # gone, a zombie, or a zombie leader whose threads live on
            found = _resident(f"{proc_dir(pid)}/status")
        total += found or 0
    return total


def _resident(status: str) -> int | None:
    """RssAnon + RssShmem of one /proc status file, None where it shows no memory."""
    try:
        fd = os.open(status, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 1 << 16)
    except OSError:
        return None
    finally:
        os.close(fd)
    total = None
    for field in (b"\nRssAnon:", b"\nRssShmem:"):
        start = text.find(field)
        if start >= 0:
            total = (total or 0) + (int(text[start + len(field) : text.index(b"kB", start)]) << 10)
    return total


def memfd_bytes(tables: dict[int, list[os.stat_result]]) -> int:
    """Pages of the memfds held open in ``tables`` (``descriptors`` of each process), each counted once (without a
    memory cgroup the seccomp filter refuses ``memfd_create`` to a run, so only the trainer's payload can be
    there)."""
    device, memfds = memfd_device(), {}
    for table in tables.values():
        for info in table:
            if info.st_dev == device:
                memfds[info.st_ino] = info.st_blocks * 512
    return sum(memfds.values())


def session_bytes(pids: list[int], tables: dict[int, list[os.stat_result]] | None = None) -> int:
    """Memory held by ``pids``: ``resident_bytes`` plus ``memfd_bytes``. Raises ``Unreadable`` for a process whose
    descriptors cannot be read. ``tables``: ``descriptors`` of each pid, already read by the caller."""
    if tables is None:
        tables = {pid: descriptors(pid) for pid in pids}
    return resident_bytes(pids) + memfd_bytes(tables)
