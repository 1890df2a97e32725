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
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()

# A custom start: returns the worker process (stdin and stdout pipes, unbuffered) and what to call after killing it.
Spawn = Callable[[], "tuple[subprocess.Popen, Callable[[], None] | None]"]


def _readable(fds: list[int], timeout_s: float) -> list[int]:
    """The descriptors of ``fds`` with something to read (or at end of file) within ``timeout_s``. ``poll``, not
    ``select``: a long-running trainer (data loaders, tokenizers, checkpoints) can hold descriptors past select's
    FD_SETSIZE (1024), where ``select`` raises ValueError."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(max(0, int(timeout_s * 1000 + 0.999)))]


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
        self._buffer = bytearray()
        self._cleanup: Callable[[], None] | None = None
        # how a (re)start runs: the pool runs it on one of its own long-lived threads (see WorkerPool)
        self.launch: Callable[[Callable[[], None]], None] = lambda start: start()

    def start(self) -> None:
        if self.spawn is not None:
            self.proc, self._cleanup = self.spawn()
        else:
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, bufsize=0
            )
        self.ready, self._buffer = False, bytearray()

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
        chunk = bytes(self._buffer)
        while b"\n" not in chunk:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not _readable([fd], remaining):
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerDied(f"worker {self.argv[:1]} exited without answering")
            self._buffer += chunk
        line, rest = bytes(self._buffer).split(b"\n", 1)
        self._buffer = bytearray(rest)
        return line

    def _ensure_ready(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self.launch(self.start)
        if not self.ready:
            try:
                line = self._readline(time.monotonic() + self.startup_timeout_s)
            except WorkerDied:
                line = None
            if line is None:
                self.kill()
                raise RuntimeError(f"worker {self.argv} did not start within {self.startup_timeout_s:.0f} s")
            self.ready = True

    def send(self, *tasks: dict) -> None:
        """Start the worker if it is not running, and write ``tasks`` (one write: one wake-up of the worker, one
        system call); ``WorkerDied`` if it exited meanwhile."""
        self._ensure_ready()
        try:
            self.proc.stdin.write("".join(json.dumps(task) + "\n" for task in tasks).encode())
        except BrokenPipeError:
            self.kill()
            raise WorkerDied(f"worker {self.argv[:1]} exited without answering") from None

    def read_answers(self, owed: int) -> list[dict]:
        """The answers whose lines are complete (call when the worker's stdout is readable), in order;
        ``WorkerDied`` (after killing the worker) at end of file or for more lines than the ``owed`` answers."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            self.kill()
            raise WorkerDied(f"worker {self.argv[:1]} exited without answering")
        if b"\n" not in chunk:  # the new bytes only, kept in a growing bytearray: linear in the answer's size
            self._buffer += chunk  # (red team round 13: a copy and a scan of the whole line per 64 KiB read)
            return []
        self._buffer += chunk
        *lines, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        if len(lines) > owed or (self._buffer and len(lines) == owed):  # output nobody asked for
            self.kill()
            raise WorkerDied(f"worker {self.argv[:1]} wrote more than it was asked")
        try:
            return [json.loads(line) for line in lines]
        except ValueError:  # not an answer (UnicodeDecodeError too): a worker out of step, never one task's result
            self.kill()
            raise WorkerDied(f"worker {self.argv[:1]} wrote a line that is not JSON") from None


class WorkerPool:
    """``size`` worker processes running ``argv`` (or started by ``spawn``), started lazily on first use, shared
    safely by any number of threads. ``map`` runs tasks concurrently, one per idle worker.

    ``map`` dispatches from the calling thread: it takes the idle workers, sends each the next task as soon as
    it has answered and waits on all their pipes at once (``poll``). No thread hand-off per task: with a
    thread per task (futures) the calling process spent more CPU per task than the JSON round trip itself,
    which bounds the speed-up of more workers on a machine whose cores are all busy.

    ``pipeline`` > 1 queues up to that many tasks per worker (for workers that read one task line at a time and
    answer in order): a worker starts its next task without waiting for the caller to read its answer and write
    the next one. Only for workers whose tasks may sit in their stdin (not a sandbox's evaluation workers).
    How many are queued follows the tasks' running duration: about ``QUEUED_WORK_S`` of work beyond the current
    task (at least one task, at most ``pipeline``), so that short tasks are written several per system call and
    their answers read several per wake-up of this process (it waits ``COALESCE_S`` before reading when the
    workers hold enough work meanwhile): each wake-up of the calling process costs more CPU than the
    dispatching itself, which bounds the speed-up of more workers when the tasks take a millisecond. Long tasks
    keep one queued behind the current one (a deep queue would end a call with one worker busy, the others idle).
    """

    QUEUED_WORK_S = 0.064
    COALESCE_S = 0.016

    def __init__(
        self,
        argv: list[str],
        size: int = 2,
        startup_timeout_s: float = 120.0,
        spawn: Spawn | None = None,
        pipeline: int = 1,
    ) -> None:
        if size < 1:
            raise ValueError(f"`num_workers` must be >= 1, got {size}.")
        if pipeline < 1:
            raise ValueError(f"`pipeline` must be >= 1, got {pipeline}.")
        self.size, self.pipeline = size, pipeline
        self.task_s: float | None = None  # running mean of a task's duration (pipelined pools), set by map
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
            for worker in self._workers:
                worker.launch = self._launch
            # Started by the pool's own threads, which live as long as the pool: a sandbox's parent-death signal
            # (bubblewrap's --die-with-parent, PR_SET_PDEATHSIG) fires when the THREAD that started it exits, so
            # never the caller's thread, which may be short-lived. All at once, so their imports overlap.
            for started in [self._executor.submit(worker.start) for worker in self._workers]:
                started.result()
            self._idle = queue.Queue()
            for worker in self._workers:
                self._idle.put(worker)

    def depth(self) -> int:
        """Tasks to queue per worker now (see the class's docstring)."""
        if self.pipeline == 1 or self.task_s is None:
            return min(self.pipeline, 2)
        return min(self.pipeline, 2 + int(self.QUEUED_WORK_S / max(self.task_s, 1e-6)))

    def _launch(self, start: Callable[[], None]) -> None:
        self._executor.submit(start).result()

    def map(self, tasks: list[dict], deadline_s: float) -> list[dict | None]:
        """Answers to ``tasks`` in order; None where a task hit its deadline (``deadline_s`` from when it was
        sent). A worker that dies without answering (or answers more than once) is replaced and asked once
        more; a second death raises ``WorkerDied``: the infrastructure's failure, never the task's timeout."""
        if not tasks:
            return []
        self._ensure_started()
        return _Dispatch(self, tasks, deadline_s).run()

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


class _Dispatch:
    """One ``map`` call: its tasks sent to the workers it holds (up to ``pipeline`` queued per worker), their
    answers read as they come. A task's deadline runs from when its worker starts it: when it is sent to a worker
    that owes nothing, else when the answer before it arrives."""

    def __init__(self, pool: WorkerPool, tasks: list[dict], deadline_s: float) -> None:
        self.pool, self.tasks, self.deadline_s = pool, tasks, deadline_s
        self.answers: list[dict | None] = [None] * len(tasks)
        self.pending: deque[tuple[int, bool]] = deque((index, False) for index in range(len(tasks)))  # (task, retry)
        self.owed: dict[_Worker, deque[tuple[int, bool]]] = {}  # the tasks each worker has, in order
        self.deadline: dict[_Worker, float] = {}  # of the task each worker is working on
        self.held: list[_Worker] = []

    def run(self) -> list[dict | None]:
        self.held.append(self.pool._idle.get())  # waits while other calls hold every worker
        try:
            while self.pending or self.owed:
                self._hold_more()
                depth, share = self.pool.depth(), -(-len(self.pending) // len(self.held))  # a short call: spread
                for worker in self.held:
                    room = min(depth - len(self.owed.get(worker, ())), share, len(self.pending))
                    if room > 0:
                        self._send(worker, [self.pending.popleft() for _ in range(room)])
                self._release_idle()
                if self.owed:
                    self._coalesce()
                    self._wait()
        finally:
            for worker in self.owed:  # only after an error: answers are still owed, never read as another's
                worker.kill()
            for worker in self.held:
                self.pool._idle.put(worker)
        return self.answers

    def _hold_more(self) -> None:
        """Take the workers that became idle meanwhile, as long as tasks wait."""
        while self.pending and len(self.held) < self.pool.size:
            try:
                self.held.append(self.pool._idle.get_nowait())
            except queue.Empty:
                return

    def _release_idle(self) -> None:
        """Give back the workers left without a task, for other calls."""
        if not self.pending:
            for worker in [worker for worker in self.held if worker not in self.owed]:
                self.held.remove(worker)
                self.pool._idle.put(worker)

    def _send(self, worker: _Worker, sending: list[tuple[int, bool]]) -> None:
        try:
            worker.send(*(self.tasks[index] for index, _ in sending))
        except WorkerDied:
            return self._died(worker, sending)
        owed = self.owed.setdefault(worker, deque())
        if not owed:
            self.deadline[worker] = time.monotonic() + self.deadline_s
        owed.extend(sending)

    def _coalesce(self) -> None:
        """Wait a little before reading when the tasks are short and every busy worker holds work for longer:
        their answers are then read several per wake-up of this process (see ``WorkerPool``)."""
        task_s = self.pool.task_s
        if self.pool.pipeline == 1 or task_s is None or task_s > self.pool.COALESCE_S:
            return
        pause = min(self.pool.COALESCE_S, (min(map(len, self.owed.values())) - 1) * task_s / 2)
        if pause > 0.0002:
            time.sleep(pause)

    def _died(self, worker: _Worker, sending: list[tuple[int, bool]] | None = None) -> None:
        """``worker`` exited (or wrote more than asked) and was killed: the task it was working on is asked once
        more (a second time raises ``WorkerDied``), the tasks queued behind it go back to the pending ones."""
        owed = self.owed.pop(worker, deque())
        self.deadline.pop(worker, None)
        owed.extend(sending or ())
        index, retry = owed.popleft()
        if retry:
            raise WorkerDied(f"worker {worker.argv[:1]} exited without answering, twice")
        self.pending.extendleft(reversed([(index, True), *owed]))

    def _timed(self, worker: _Worker, answered: int) -> None:
        """Update the pool's running task duration with ``answered`` answers of ``worker`` (busy since its
        deadline's start; the answers may have waited in the pipe: an estimate on the long side)."""
        if self.pool.pipeline > 1:
            sample = (time.monotonic() - self.deadline[worker] + self.deadline_s) / answered
            self.pool.task_s = sample if self.pool.task_s is None else 0.8 * self.pool.task_s + 0.2 * sample

    def _wait(self) -> None:
        """Read the answers that came; kill the workers past their task's deadline (the task's answer: None)."""
        by_fd = {worker.proc.stdout.fileno(): worker for worker in self.owed}
        timeout = max(0.0, min(self.deadline.values()) - time.monotonic())
        for fd in _readable(list(by_fd), timeout):
            worker = by_fd[fd]
            owed = self.owed[worker]
            try:
                answers = worker.read_answers(len(owed))
            except WorkerDied:
                self._died(worker)
                continue
            for answer in answers:
                self.answers[owed.popleft()[0]] = answer
            if answers:
                self._timed(worker, len(answers))
            if not owed:
                del self.owed[worker], self.deadline[worker]
            elif answers:
                self.deadline[worker] = time.monotonic() + self.deadline_s  # it starts on the next one now
        now = time.monotonic()
        for worker, deadline in list(self.deadline.items()):
            if deadline <= now:
                worker.kill()  # a hard deadline: the next task gets a fresh process
                owed = self.owed.pop(worker)
                del self.deadline[worker]
                owed.popleft()  # the late task's answer stays None
                self.pending.extendleft(reversed(owed))


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()
