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
from trl_ext.sandbox.reaper import kill_session, processes

_UNIQUE = itertools.count()
MAX_DEPTH = 512  # directories open at once while measuring; deeper nesting counts as hiding
ENTRY_BYTES = 4096  # the least one entry counts for while watching (an inode is not free: 80,000 empty files)


class Hidden(Exception):
    """A directory of the scratch cannot be listed: what it holds cannot be measured."""


class ScratchWatch:
    """Learns the run's session id from the launcher and, while the run lasts, kills the session once the scratch
    directory holds more than ``cap_bytes`` or has a directory it cannot list (the seccomp filter refuses modes
    that take read or search from the owner, so only a hiding attempt makes one), or, with ``memory_cap`` (no
    memory cgroup), once the session's processes hold more than that (``oom`` is then set).

    Every poll (20 ms) reads each run process's descriptors, whatever the scratch holds: memfds and files unlinked
    while open are summed there, and a process whose descriptors cannot be read (it made itself non-dumpable)
    counts as hiding. The walk of the directory, whose cost grows with its entries (each counted as at least
    ``ENTRY_BYTES``, so at most ``cap_bytes / ENTRY_BYTES`` are walked), runs every poll while it is quick and
    otherwise waits up to four times its last duration (at most ``_MAX_GAP_S``): the watcher spends at most a
    fifth of a core on it. A per-poll ``statvfs`` of the scratch's file system (one syscall, whatever the entries)
    ends that wait: once the file system grew by more than the room the last walk left under the cap, the walk
    runs at that poll. Other writers on that file system can only make walks more frequent, never a kill. Since
    the seccomp filter refuses ``fallocate`` (an instant 16 MiB per call), a run adds between two measures at most
    what its processes write in one poll and one walk."""

    _POLL_S = 0.02
    _MAX_GAP_S = 0.25

    def __init__(
        self,
        pid_fd: int,
        scratch: str,
        cap_bytes: int,
        memory_cap: int | None = None,
        pids: Callable[[], list[int]] | None = None,
    ) -> None:
        """``pids``: lists the run's processes (its memory cgroup's), instead of scanning /proc for its session."""
        self.pid_fd, self.scratch, self.cap_bytes, self.memory_cap = pid_fd, scratch, cap_bytes, memory_cap
        self.pids = pids
        self.sid, self.oom, self.exceeded, self.walks = 0, False, False, 0
        self._walked = (0, _used_bytes(scratch))  # what the last walk found, the file system's use when it began
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trl-ext-scratch-watch", daemon=True)
        self._thread.start()

    def _read_sid(self) -> None:
        if not self.sid:
            with contextlib.suppress(BlockingIOError, ValueError, OSError):
                self.sid = int(os.read(self.pid_fd, 32) or 0)

    def _grew_past_room(self, deleted: int) -> bool:
        """Whether the file system grew, since the last walk began, by more than the cap leaves room for."""
        held, used = self._walked
        return _used_bytes(self.scratch) - used > self.cap_bytes - held - deleted

    def _over(self, walk: bool = True) -> bool:
        pids = self.pids() if self.pids is not None else [p.pid for p in processes() if p.sid == self.sid]
        try:
            tables = {pid: memory.descriptors(pid) for pid in pids}
        except memory.Unreadable:
            self.exceeded = True  # what it holds cannot be measured: hiding
            return True
        if self.memory_cap is not None:  # first: a long scratch walk must not delay it
            self.oom = self.oom or memory.session_bytes(pids, tables) > self.memory_cap
        deleted = deleted_open_bytes(self.scratch, tables)
        if walk or self._grew_past_room(deleted):
            used = _used_bytes(self.scratch)
            try:
                held = scratch_bytes(self.scratch, strict=True, entry_bytes=ENTRY_BYTES, stop_above=self.cap_bytes)
            except Hidden:
                self.exceeded = True
                return True
            self._walked, self.walks = (held, used), self.walks + 1
        self.exceeded = self.exceeded or self._walked[0] + deleted > self.cap_bytes
        return self.exceeded or self.oom

    def _watch(self) -> None:
        next_walk = 0.0
        while not self._stop.wait(self._POLL_S):
            self._read_sid()
            if not self.sid:
                continue
            started, walks = time.monotonic(), self.walks
            if self._over(started >= next_walk):
                kill_session(self.sid)
                return
            if self.walks != walks:  # the next walk after four times this one's duration, within the cap
                next_walk = time.monotonic() + min(4 * (time.monotonic() - started), self._MAX_GAP_S)

    def stop(self) -> int:
        """Stop watching, measuring once more (a burst between two polls still counts: ``exceeded``); the run's
        session id (0 if the launcher never reported it)."""
        self._stop.set()
        self._thread.join()
        self._read_sid()
        if not self.exceeded:
            self._over()
        return self.sid


def _used_bytes(root: str) -> int:
    """The bytes in use on ``root``'s file system (one ``statvfs``; 0 if it is gone)."""
    try:
        info = os.statvfs(root)
    except OSError:
        return 0
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def deleted_open_bytes(root: str, tables: dict[int, list[tuple[str, os.stat_result]]]) -> int:
    """Disk space of files on ``root``'s file system held open after being unlinked (no directory lists them any
    more), each counted once; ``tables``: ``memory.descriptors`` of each run process (an unreadable one raised
    there: it counts as hiding)."""
    try:
        device = os.stat(root).st_dev
    except FileNotFoundError:
        return 0
    held = {}
    for table in tables.values():
        for _, info in table:
            if info.st_dev == device and info.st_nlink == 0 and not stat.S_ISDIR(info.st_mode):
                held[info.st_ino] = info.st_blocks * 512
    return sum(held.values())


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
