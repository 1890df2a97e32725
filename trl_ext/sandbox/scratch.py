"""The run's scratch directory where no capped tmpfs can be mounted (landlock): a size watcher and a clean-up that
always succeeds."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading

from trl_ext.sandbox.reaper import kill_session


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
