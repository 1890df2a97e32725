"""A small pool of persistent, killable worker processes speaking JSON lines, with a hard per-task deadline."""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()

# A custom start: returns the worker process (stdin and stdout pipes, unbuffered) and what to call after killing it.
Spawn = Callable[[], "tuple[subprocess.Popen, Callable[[], None] | None]"]


class WorkerDied(RuntimeError):
    """A worker exited (or wrote output nobody asked for) instead of answering, twice in a row."""


class _Worker:
    """One worker process. Not thread-safe: the pool hands each worker to one thread at a time."""

    def __init__(self, argv: list[str], startup_timeout_s: float, spawn: Spawn | None = None) -> None:
        self.argv = argv
        self.startup_timeout_s = startup_timeout_s
        self.spawn = spawn
        self.proc: subprocess.Popen | None = None
        self.ready = False
        self._buffer = b""
        self._cleanup: Callable[[], None] | None = None

    def start(self) -> None:
        if self.spawn is not None:
            self.proc, self._cleanup = self.spawn()
        else:
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, bufsize=0
            )
        self.ready, self._buffer = False, b""

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
        if self._cleanup is not None:
            self._cleanup()
        self.proc, self.ready, self._cleanup = None, False, None

    def _readline(self, deadline: float) -> bytes | None:
        """One line; None at the deadline; raises ``WorkerDied`` at end of file (the worker exited)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerDied(f"worker {self.argv[:1]} exited without answering")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _ensure_ready(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self.start()
        if not self.ready:
            try:
                line = self._readline(time.monotonic() + self.startup_timeout_s)
            except WorkerDied:
                line = None
            if line is None:
                self.kill()
                raise RuntimeError(f"worker {self.argv} did not start within {self.startup_timeout_s:.0f} s")
            self.ready = True

    def _ask(self, task: dict, deadline_s: float) -> dict | None:
        self._ensure_ready()
        try:
            self.proc.stdin.write(json.dumps(task).encode() + b"\n")
            line = self._readline(time.monotonic() + deadline_s)
        except (BrokenPipeError, WorkerDied):
            self.kill()
            raise WorkerDied(f"worker {self.argv[:1]} exited without answering") from None
        if line is None:
            self.kill()  # a hard deadline: the next task gets a fresh process
            return None
        if self._buffer:  # output nobody asked for: never read as a later task's answer
            self.kill()
            raise WorkerDied(f"worker {self.argv[:1]} wrote more than one answer")
        return json.loads(line)

    def request(self, task: dict, deadline_s: float) -> dict | None:
        """Send ``task`` and wait for the answer; None (after killing the worker) at the deadline. A worker that
        dies without answering (or answers more than once) is replaced and asked once more; a second death
        raises ``WorkerDied``: the infrastructure's failure, never the task's timeout."""
        try:
            return self._ask(task, deadline_s)
        except WorkerDied:
            return self._ask(task, deadline_s)


class WorkerPool:
    """``size`` worker processes running ``argv`` (or started by ``spawn``), started lazily on first use, shared
    safely by any number of threads. ``map`` runs tasks concurrently, one per idle worker."""

    def __init__(
        self,
        argv: list[str],
        size: int = 2,
        startup_timeout_s: float = 120.0,
        spawn: Spawn | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"`num_workers` must be >= 1, got {size}.")
        self.size = size
        self._argv = argv
        self._spawn = spawn
        self._startup_timeout_s = startup_timeout_s
        self._lock = threading.Lock()
        self._idle: queue.Queue[_Worker] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._workers: list[_Worker] = []
        _POOLS.add(self)

    def _ensure_started(self) -> None:
        with self._lock:
            if self._idle is not None:
                return
            self._workers = [_Worker(self._argv, self._startup_timeout_s, self._spawn) for _ in range(self.size)]
            self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="trl-ext-worker")
            # Started by the pool's own threads, which live as long as the pool: a sandbox's parent-death signal
            # (bubblewrap's --die-with-parent, PR_SET_PDEATHSIG) fires when the THREAD that started it exits, so
            # never the caller's thread, which may be short-lived. All at once, so their imports overlap.
            for started in [self._executor.submit(worker.start) for worker in self._workers]:
                started.result()
            self._idle = queue.Queue()
            for worker in self._workers:
                self._idle.put(worker)

    def _run_one(self, task: dict, deadline_s: float) -> dict | None:
        worker = self._idle.get()
        try:
            return worker.request(task, deadline_s)
        finally:
            self._idle.put(worker)

    def map(self, tasks: list[dict], deadline_s: float) -> list[dict | None]:
        """Answers to ``tasks`` in order; None where a task hit its deadline or crashed its worker."""
        if not tasks:
            return []
        self._ensure_started()
        futures = [self._executor.submit(self._run_one, task, deadline_s) for task in tasks]
        return [future.result() for future in futures]

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and monitoring)."""
        return [w.proc.pid for w in self._workers if w.proc is not None and w.proc.poll() is None]

    def close(self) -> None:
        """Kill every worker; the pool starts afresh if used again."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
            for worker in self._workers:
                worker.kill()
            self._workers, self._idle, self._executor = [], None, None


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()
