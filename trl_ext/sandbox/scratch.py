"""The run's scratch directory where no capped tmpfs can be mounted (landlock): a watcher that bounds its size (and,
without a memory cgroup, the run's memory) and a clean-up that always succeeds."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import threading
import time
from collections.abc import Callable

from trl_ext.sandbox import memory
from trl_ext.sandbox.admission import note_contention, task_count
from trl_ext.sandbox.reaper import kill_session

_UNIQUE = itertools.count()
MAX_DEPTH = 512  # directories open at once while measuring; deeper nesting counts as hiding
ENTRY_BYTES = 4096  # the least one entry counts for while watching (an inode is not free: 80,000 empty files)


class Hidden(Exception):
    """A directory of the scratch cannot be listed, or the run holds more mappings than a measure reads: what it
    holds cannot be measured."""


class ScratchWatch:
    """Learns the run's session id from the launcher and, while the run lasts, kills the session once its scratch
    holds more than ``cap_bytes`` or hides something from the measure, or, with ``memory_cap`` (no memory
    cgroup), once the session's processes hold more than that (``oom`` is then set).

    Every poll (20 ms) costs one /proc status read per run process (resident memory, with ``memory_cap``), one
    ``statvfs`` of the scratch's file system and, without ``pids``, a listing of /proc (``_Session``). The measure of the scratch (``_measure``: the directory walk, every
    run process's descriptors and its mappings) runs every poll while it is quick and otherwise waits ``_SPEND``
    times its last duration (at most ``_MAX_GAP_S``): a tenth of a core at most while a measure takes up to
    110 ms, which the defaults' worst case stays under (each entry counted as at least ``ENTRY_BYTES``, so at most
    ``cap_bytes / ENTRY_BYTES`` are walked; ``nproc x nofile`` descriptors; ``MAX_MAPS_BYTES`` of mapping text,
    more counts as hiding). The ``statvfs`` ends that wait: once the file system grew by more than the room the last
    measure left under the cap, the measure runs at that poll. Other writers on that file system can only make
    measures more frequent, never a kill. Since the seccomp filter refuses ``fallocate`` (an instant 16 MiB per
    call), a run adds between two measures at most what its processes write in one poll and one measure.

    ``scratch`` None: a scratch the kernel caps (a fork server child's own tmpfs): nothing to measure there.
    ``file_bytes``: the run's RLIMIT_FSIZE, what a mapped file that no directory or descriptor holds is charged."""

    _POLL_S = 0.02
    _MAX_GAP_S = 1.0
    _SPEND = 9

    def __init__(
        self,
        pid_fd: int,
        scratch: str | None,
        cap_bytes: int,
        memory_cap: int | None = None,
        pids: Callable[[], list[int]] | None = None,
        file_bytes: int = 16 << 20,
        kill: Callable[[], None] | None = None,
        inodes: Callable[[], int] | None = None,
        tasks_cap: int | None = None,
    ) -> None:
        """``pids``: lists the run's processes (its memory cgroup's, or its pid namespace's), instead of scanning
        /proc for its session; ``kill``: ends the run past a bound (default: kill its session). ``pid_fd`` -1: no
        session id to wait for (``pids`` and ``kill`` given). ``inodes``: the inodes in use on a scratch the kernel
        caps in bytes only (each counts ``ENTRY_BYTES`` against ``cap_bytes``). ``tasks_cap``: the run is killed (``exceeded``)
        once its processes hold more tasks (threads) than that (``admission.tasks_cap``)."""
        self.pid_fd, self.cap_bytes, self.memory_cap = pid_fd, cap_bytes, memory_cap
        self.scratch = os.path.realpath(scratch) if scratch is not None else None  # as /proc/<pid>/maps names it
        self.pids, self.file_bytes, self.kill, self.inodes = pids, file_bytes, kill, inodes
        self.tasks_cap = tasks_cap
        self.sid, self.oom, self.exceeded, self.walks = -1 if pid_fd < 0 else 0, False, False, 0
        self._memfds = 0  # memfd pages the last measure found (without a cgroup only the trainer's payload)
        self._session = _Session()
        self._walked = (0, _used_bytes(scratch) if scratch else 0)  # what the last measure found, the fs's use
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trl-ext-scratch-watch", daemon=True)
        if (
            self.scratch is not None or memory_cap is not None or tasks_cap is not None
        ):  # else no poll could find anything: no thread
            self._thread.start()

    def _read_sid(self) -> None:
        if not self.sid:
            with contextlib.suppress(BlockingIOError, ValueError, OSError):
                self.sid = int(os.read(self.pid_fd, 32) or 0)

    def _grew_past_room(self) -> bool:
        """Whether the file system grew, since the last measure began, by more than the cap leaves room for."""
        held, used = self._walked
        return _used_bytes(self.scratch) - used > self.cap_bytes - held

    def _measure(self, pids: list[int]) -> None:
        """Everything the run's scratch holds: the directory's entries, files the run's processes hold open after
        unlinking them (exact) and files unlinked while mapped (``file_bytes`` each). Raises ``Hidden`` or
        ``memory.Unreadable``."""
        used = _used_bytes(self.scratch)
        tables = {pid: memory.descriptors(pid) for pid in pids}
        self._memfds = memory.memfd_bytes(tables)
        unlinked = deleted_open_bytes(self.scratch, tables) + mapped_deleted_bytes(
            self.scratch, pids, tables, self.file_bytes
        )
        held = scratch_bytes(self.scratch, strict=True, entry_bytes=ENTRY_BYTES, stop_above=self.cap_bytes - unlinked)
        self._walked, self.walks = (held + unlinked, used), self.walks + 1

    def _over(self, walk: bool = True) -> bool:
        pids = self.pids() if self.pids is not None else self._session.pids(self.sid)
        if self.tasks_cap is not None and task_count(pids) > self.tasks_cap:
            self.exceeded = True  # past its own `nproc` where its RLIMIT_NPROC is uid-wide
            note_contention()  # a sibling may have been refused meanwhile: its rerun is warranted
            return True
        if self.memory_cap is not None:  # first: a long measure must not delay it
            self.oom = self.oom or memory.resident_bytes(pids) + self._memfds > self.memory_cap
        if self.scratch is not None and (walk or self._grew_past_room()):
            try:
                self._measure(pids)
            except (Hidden, memory.Unreadable):
                self.exceeded = True  # what it holds cannot be measured: hiding
                return True
        self.exceeded = self.exceeded or self._walked[0] > self.cap_bytes
        if self.inodes is not None and self.inodes() * ENTRY_BYTES > self.cap_bytes:
            self.exceeded = True
        return self.exceeded or self.oom

    def _watch(self) -> None:
        next_walk = 0.0
        while not self._stop.wait(self._POLL_S):
            self._read_sid()
            if not self.sid:
                continue
            started, walks = time.monotonic(), self.walks
            if self._over(started >= next_walk):
                self.kill() if self.kill is not None else kill_session(self.sid)
                return
            if self.walks != walks:  # the next measure after _SPEND times this one's duration, within the gap
                next_walk = time.monotonic() + min(self._SPEND * (time.monotonic() - started), self._MAX_GAP_S)

    def stop(self) -> int:
        """Stop watching, measuring once more (a burst between two polls still counts: ``exceeded``); the run's
        session id (0 if the launcher never reported it)."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join()
        self._read_sid()
        if not self.exceeded:
            self._over()
        return self.sid


class _Session:
    """The processes of one session, polled: /proc is listed every poll and only the stat of pids not seen before
    is read. A process's session never changes here (seccomp refuses ``setsid`` to a run; a process outside it
    cannot join it; only the leader, whose pid is the session id, joins it by its own ``setsid``, maybe after
    it was first listed), and a pid is forgotten as soon as a listing lacks it: reusing a pid within one poll
    would take ``pid_max`` forks."""

    def __init__(self) -> None:
        self._member: dict[int, bool] = {}

    def pids(self, sid: int) -> list[int]:
        member = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            known = self._member.get(pid) or pid == sid  # the leader may list before its setsid()
            if not known and pid not in self._member:
                found = _session_of(pid)
                if found is None:
                    continue  # gone
                known = found == sid
            member[pid] = known
        self._member = member
        return [pid for pid, inside in member.items() if inside]


def _session_of(pid: int) -> int | None:
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(text[text.rfind(b")") + 2 :].split()[3])


def _used_bytes(root: str) -> int:
    """The bytes in use on ``root``'s file system (one ``statvfs``; 0 if it is gone)."""
    try:
        info = os.statvfs(root)
    except OSError:
        return 0
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def deleted_open_bytes(root: str, tables: dict[int, list[os.stat_result]]) -> int:
    """Disk space of files on ``root``'s file system held open after being unlinked (no directory lists them any
    more), each counted once; ``tables``: ``memory.descriptors`` of each run process (an unreadable one raised
    there: it counts as hiding)."""
    try:
        device = os.stat(root).st_dev
    except FileNotFoundError:
        return 0
    held = {}
    for table in tables.values():
        for info in table:
            if info.st_dev == device and info.st_nlink == 0 and not stat.S_ISDIR(info.st_mode):
                held[info.st_ino] = info.st_blocks * 512
    return sum(held.values())


MAX_MAPS_BYTES = 4 << 20  # /proc/<pid>/maps text one measure reads, all run processes together; more is hiding
_DELETED = b" (deleted)"


def mapped_deleted_bytes(root: str, pids: list[int], tables: dict[int, list[os.stat_result]], file_bytes: int) -> int:
    """What files under ``root`` that were unlinked while mapped hold: no directory lists them and, once their
    descriptor is closed, no descriptor either, yet a mapping of one page keeps every block of the file (MAP_SHARED
    or MAP_PRIVATE alike). Their size cannot be read without CAP_SYS_ADMIN (``/proc/<pid>/map_files``), so each
    file counts as ``file_bytes`` (RLIMIT_FSIZE: no process of the run can make a file larger), once, unless a
    descriptor in ``tables`` still holds it (``deleted_open_bytes`` counts it exactly). Raises
    ``memory.Unreadable`` for a process whose mappings cannot be read and ``Hidden`` past ``MAX_MAPS_BYTES`` of
    mapping text (65,536 mappings take ~5 MiB; the bound also covers long paths, which cost the kernel more)."""
    prefix = os.fsencode(root.rstrip("/") + "/")
    held_open = {(info.st_dev, info.st_ino) for table in tables.values() for info in table}
    mapped, budget = set(), MAX_MAPS_BYTES
    for pid in pids:
        text = _mappings(pid, budget)
        budget -= len(text)
        for line in text.splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith(prefix) and line.endswith(_DELETED):
                major, minor = fields[3].split(b":")
                mapped.add((os.makedev(int(major, 16), int(minor, 16)), int(fields[4])))
    return len(mapped - held_open) * file_bytes


def _mappings(pid: int, budget: int) -> bytes:
    """``/proc/<pid>/maps`` (empty once the process is gone), read in pieces (the kernel formats each as it is read)
    and never past ``budget`` bytes: ``Hidden`` beyond."""
    text = _read_mappings(f"/proc/{pid}/maps", pid, budget)
    if not text:  # gone, a zombie, or a zombie leader whose threads live on
        text = _read_mappings(f"{memory.proc_dir(pid)}/maps", pid, budget)
    return text


def _read_mappings(path: str, pid: int, budget: int) -> bytes:
    pieces, size = [], 0
    try:
        with open(path, "rb", buffering=0) as maps:
            while piece := maps.read(1 << 16):
                pieces.append(piece)
                size += len(piece)
                if size > budget:
                    raise Hidden(f"more than {MAX_MAPS_BYTES} bytes of mappings")
    except (FileNotFoundError, ProcessLookupError):
        return b""
    except OSError as exc:  # EACCES: not dumpable (or exiting: nothing mapped any more)
        if memory.released(os.path.dirname(path)):
            return b""
        raise memory.Unreadable(f"mappings of process {pid}: {exc}") from exc
    return b"".join(pieces)


def scratch_bytes(root: str, strict: bool = False, entry_bytes: int = 0, stop_above: int | None = None) -> int:
    """Disk space held by the files and directories under ``root`` (directory blocks too: empty directories are not
    free), walked by descriptors (no path grows past PATH_MAX), each entry counted as at least ``entry_bytes``; the
    walk ends early once the total is above ``stop_above``. With ``strict``, a directory that cannot be listed, or
    nesting deeper than ``MAX_DEPTH``, raises ``Hidden``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    total, stack = 0, []
    try:
        top = os.open(root, flags)
        stack.append((top, list(os.scandir(top))))
        total += os.fstat(top).st_blocks * 512
        while stack:
            fd, entries = stack[-1]
            if not entries:
                os.close(stack.pop()[0])
                continue
            if stop_above is not None and total > stop_above:
                break
            entry = entries.pop()
            try:
                total += max(entry.stat(follow_symlinks=False).st_blocks * 512, entry_bytes)
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if len(stack) >= MAX_DEPTH:
                    if strict:
                        raise Hidden(f"nesting deeper than {MAX_DEPTH}")
                    continue
                sub = os.open(entry.name, flags, dir_fd=fd)
                stack.append((sub, []))
                stack[-1] = (sub, list(os.scandir(sub)))
            except FileNotFoundError:
                continue
    except FileNotFoundError:
        pass
    except OSError as exc:
        if strict:
            raise Hidden(str(exc)) from exc
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total


def remove_scratch(scratch: str | None) -> None:
    """Remove ``scratch`` whatever it holds: directories without read or search permission (the owner gives them
    back), nesting deeper than any path or recursion limit (every subdirectory's entries move up to the top one,
    an O(1) rename, so nothing recurses), any names; a writer still running is the caller's to kill first, and
    what it adds meanwhile is removed on the next pass."""
    if not scratch:
        return
    for _ in range(100):
        try:
            top = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return
        except PermissionError:
            with contextlib.suppress(OSError):
                os.chmod(scratch, 0o700)
            continue
        try:
            _empty(top)
            os.rmdir(scratch)
            return
        except OSError:
            continue
        finally:
            os.close(top)


def _empty(top: int) -> None:
    """Delete everything in the directory open as ``top``, flattening nested directories into it."""
    while names := os.listdir(top):
        for name in names:
            try:
                mode = os.stat(name, dir_fd=top, follow_symlinks=False).st_mode
                if not stat.S_ISDIR(mode):
                    os.unlink(name, dir_fd=top)
                    continue
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=top)
                    continue
                sub = _open_dir(top, name)
                try:
                    for child in os.listdir(sub):
                        if stat.S_ISDIR(os.stat(child, dir_fd=sub, follow_symlinks=False).st_mode):
                            _give_back(sub, child)  # moving a directory rewrites its "..": needs write on it
                        os.rename(child, f".trl-ext-rm-{next(_UNIQUE)}", src_dir_fd=sub, dst_dir_fd=top)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=top)
            except FileNotFoundError:
                continue


def _open_dir(parent: int, name: str) -> int:
    """Open a subdirectory for listing and moving its entries, giving the owner rwx on it first."""
    _give_back(parent, name)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)


def _give_back(parent: int, name: str) -> None:
    """chmod 0700 a directory that may not be readable (only its owner or root can: the caller is one of them)."""
    handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    try:
        os.chmod(f"/proc/self/fd/{handle}", 0o700)  # fchmod refuses O_PATH descriptors; the link does not
    finally:
        os.close(handle)
