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
    memory cgroup), once the session's processes hold more than that (``oom`` is then set). Polled every 20 ms,
    so a run can overshoot by what it writes or allocates in that time (per file bounded by RLIMIT_FSIZE, per
    process by RLIMIT_AS). The memory poll comes first and runs every time; the scratch walk, whose cost grows with
    the entries (each counted as at least ``ENTRY_BYTES``, so at most ``cap_bytes / ENTRY_BYTES`` are walked), waits
    four times its own last duration between walks: the watcher spends at most a fifth of a core on it."""

    _POLL_S = 0.02

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
        self.sid, self.oom, self.exceeded = 0, False, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trl-ext-scratch-watch", daemon=True)
        self._thread.start()

    def _read_sid(self) -> None:
        if not self.sid:
            with contextlib.suppress(BlockingIOError, ValueError, OSError):
                self.sid = int(os.read(self.pid_fd, 32) or 0)

    def _over(self, walk: bool = True) -> bool:
        pids = self.pids() if self.pids is not None else [p.pid for p in processes() if p.sid == self.sid]
        if self.memory_cap is not None:  # first: a long scratch walk must not delay it
            self.oom = self.oom or memory.session_bytes(pids) > self.memory_cap
        if walk:
            try:
                held = scratch_bytes(self.scratch, strict=True, entry_bytes=ENTRY_BYTES, stop_above=self.cap_bytes)
                self.exceeded = self.exceeded or held + deleted_open_bytes(self.scratch, pids) > self.cap_bytes
            except Hidden:
                self.exceeded = True
        return self.exceeded or self.oom

    def _watch(self) -> None:
        next_walk = 0.0
        while not self._stop.wait(self._POLL_S):
            self._read_sid()
            if not self.sid:
                continue
            started = time.monotonic()
            walk = started >= next_walk
            if self._over(walk):
                kill_session(self.sid)
                return
            if walk:  # the next walk after four times this one's duration (at least every poll when it is quick)
                next_walk = time.monotonic() + 4 * (time.monotonic() - started)

    def stop(self) -> int:
        """Stop watching, measuring once more (a burst between two polls still counts: ``exceeded``); the run's
        session id (0 if the launcher never reported it)."""
        self._stop.set()
        self._thread.join()
        self._read_sid()
        if not self.exceeded:
            self._over()
        return self.sid


def deleted_open_bytes(root: str, pids: list[int]) -> int:
    """Disk space of files on ``root``'s file system that ``pids`` hold open after unlinking them (no directory
    lists them any more), each counted once. A process whose descriptors cannot be read raises ``Hidden``."""
    try:
        device = os.stat(root).st_dev
    except FileNotFoundError:
        return 0
    held = {}
    for pid in pids:
        try:
            entries = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue  # exited meanwhile
        except OSError as exc:  # not dumpable: what it holds cannot be measured
            raise Hidden(f"descriptors of process {pid}: {exc}") from exc
        for name in entries:
            with contextlib.suppress(OSError):
                info = os.stat(f"/proc/{pid}/fd/{name}")
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
