"""Admission of runs as a non-root uid, and the one rerun of a run a sibling may have starved.

As non-root every run has the trainer's uid, and the kernel bounds the uid's tasks (processes and threads) by the
trainer's RLIMIT_NPROC. The runs together may reach ``ceiling`` (``_confinement.runs_ceiling`` of that limit: the
rest is the trainer's reserve), so at most ``(ceiling - base) // LOCAL_WORLD_SIZE // (nproc + 2)`` runs are in
flight per trainer process (``base``: the uid's tasks, measured when no run is in flight; ``LOCAL_WORLD_SIZE``:
the trainer processes of the host, ``local_world_size``; 2: the trainer's own threads per run); the others wait,
in arrival order, they never fail. Every run of
the bubblewrap and landlock backends passes here (``forked_run.ForkServedBackend.launch``: per-run launches, fork
servers and ``sandbox-serve`` behind them). As root each run has a uid of its own: nothing is limited here.

Where a run cannot have a user namespace of its own (the shared-budget mode: Docker's and Kubernetes' default
seccomp profiles, ``user.max_user_namespaces=0``), the kernel cannot give a run a budget of its own: each run's
RLIMIT_NPROC is the uid-wide ``ceiling`` and its watcher kills it past ``nproc`` tasks (``tasks_cap``). In both
modes a run whose program had a thread or process refused (the harness leaves ``REFUSED_FLAG`` in its scratch;
only such a program can be starved by a sibling, or by a finished run's processes the container's init has not
reaped yet) and that failed is run once more, alone (no other run in flight), if the trainer itself saw
contention while it ran (``_Contention``: a sibling killed past its cap, the uid's tasks at the ceiling); that
verdict stands. The rerun is decided by the judge (``judged``: it knows the verdict and grades the rerun afresh)
or, for a run nobody grades while it runs (``sandbox.run``, ``sandbox-serve``), here. Reruns are counted and
logged (``reruns``): a program that forges the flag gets no rerun unless a real contention coincides with it.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import os
import resource
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from trl_ext.sandbox._confinement import runs_ceiling
from trl_ext.sandbox._process import Progress, RunResult
from trl_ext.sandbox.limits import Limits

_LOGGER = logging.getLogger("trl_ext.sandbox")
REFUSED_FLAG = ".trl-ext-refused"  # written by the harness (``_harness._note_refusals``) into the run's scratch
UNLIMITED_ROOM = 4096  # an unlimited trainer limit: the runs' tasks together stop this far above the uid's
_TRAINER_TASKS_PER_RUN = 2  # the trainer's thread waiting on a run and the run's watcher: charged with its nproc
_REMEASURE_S = 1.0  # the uid's tasks are measured again at most this often (a /proc scan)
_GRACE_S = 0.1  # a few watcher polls (20 ms): a refused run may end before its offending sibling is killed
_LOCAL = threading.local()
_T = TypeVar("_T")


def uid_tasks() -> int:
    """Tasks (processes and threads) of this process's uid: what RLIMIT_NPROC counts."""
    uid, total = os.getuid(), 0
    for entry in os.scandir("/proc"):  # the owner first: only the uid's own stat files are read
        try:
            if not entry.name.isdigit() or entry.stat().st_uid != uid:
                continue
            with open(os.path.join(entry.path, "stat"), "rb") as stat:
                text = stat.read()
        except OSError:
            continue  # gone
        total += int(text[text.rfind(b")") + 2 :].split()[17])
    return total


class _Contention:
    """A count that only grows, of the moments the TRAINER saw the uid's tasks meet the ceiling: a run's watcher
    killed it past its ``tasks_cap`` (``scratch.ScratchWatch``), or a poll while runs are in flight (every
    ``_POLL_S``, one /proc scan) found the uid's tasks at or over ``ceiling``. A rerun needs the count to have
    moved during the run (``since``): the refused flag is written by the program's own process and proves
    nothing alone (a wrong program forging it would get a second draw)."""

    _POLL_S = 0.1

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = self._watching = 0
        self._thread: threading.Thread | None = None

    def note(self) -> None:
        with self._cond:
            self._count += 1

    def count(self) -> int:
        with self._cond:
            return self._count

    @contextlib.contextmanager
    def polled(self) -> Iterator[None]:
        """While a run is in flight: the uid's tasks are polled."""
        with self._cond:
            self._watching += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._poll, name="trl-ext-uid-poll", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._watching -= 1

    def _poll(self) -> None:
        while True:
            with self._cond:
                while not self._watching:
                    self._cond.wait()
            if uid_tasks() >= ceiling():
                self.note()
            time.sleep(self._POLL_S)

    def since(self, count: int) -> bool:
        """Whether the trainer saw contention after ``count`` was read; asked once a flagged run failed, so a
        sibling's overshoot is looked for once more (its watcher's next poll; the uid's tasks now)."""
        if self.count() != count:
            return True
        if uid_tasks() >= ceiling():
            self.note()
            return True
        time.sleep(_GRACE_S)  # the refused run may end before the offending sibling's watcher polls
        return self.count() != count


_CONTENTION = _Contention()


def note_contention() -> None:
    """A run's watcher killed it past its ``tasks_cap``: a sibling may have been refused a thread or process."""
    _CONTENTION.note()


def task_count(pids: list[int]) -> int:
    """Tasks of ``pids`` (each process's threads; a zombie counts one: it holds its place until reaped)."""
    total = 0
    for pid in pids:
        try:
            total += len(os.listdir(f"/proc/{pid}/task")) or 1
        except OSError:
            continue  # gone
    return total


@functools.cache
def _unlimited_ceiling() -> int:
    return uid_tasks() + UNLIMITED_ROOM


def ceiling() -> int:
    """The uid's task count all non-root runs together may reach: ``runs_ceiling`` of the trainer's RLIMIT_NPROC;
    where that is unlimited, the uid's tasks at first use plus ``UNLIMITED_ROOM`` (a shared-budget run needs a
    finite RLIMIT_NPROC; 128 runs of ``nproc`` 32 fit: in effect no admission limit)."""
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    return _unlimited_ceiling() if soft == resource.RLIM_INFINITY else runs_ceiling(soft)


def shared(own_user_namespace: bool) -> bool:
    """Whether a run shares the uid's budget: non-root, and no user namespace of its own."""
    return os.geteuid() != 0 and not own_user_namespace


def tasks_cap(limits: Limits, own_user_namespace: bool) -> int | None:
    """What the run's watcher kills it above (``ScratchWatch``): ``nproc`` tasks in the shared-budget mode (its
    RLIMIT_NPROC is uid-wide there), else nothing (the kernel holds it at ``nproc``)."""
    return limits.nproc if shared(own_user_namespace) else None


@dataclasses.dataclass
class _Note:
    """What the runs of one launch (or of one graded program: ``judged``) told: whether a thread or process was
    refused; ``alone``: the program's runs are its rerun, each admitted alone."""

    refused: bool = False
    alone: bool = False


def note_run(scratch: str | None) -> None:
    """After a run, before its scratch goes: record whether its program had a thread or process refused
    (``REFUSED_FLAG``). Called by the backends; a no-op outside ``launch`` and as root."""
    note = getattr(_LOCAL, "note", None)
    if note is None or scratch is None or os.geteuid() == 0:
        return
    note.refused = note.refused or os.path.lexists(os.path.join(scratch, REFUSED_FLAG))


def local_world_size() -> int:
    """Trainer processes of this uid on this host sharing its ceiling: ``LOCAL_WORLD_SIZE`` (set by ``torchrun``
    and ``accelerate launch``), else 1. Each admits runs within its share of the room."""
    raw = os.environ.get("LOCAL_WORLD_SIZE", "1")
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(
            f"LOCAL_WORLD_SIZE={raw!r}: expected the number of trainer processes on this host (an integer >= 1); "
            "unset it for a single process"
        )
    return size


class _Gate:
    """At most ``room`` tasks' worth of runs (each charged its ``nproc`` + the trainer's threads for it) in flight,
    admitted in arrival order (a run that does not fit yet holds back every later one, so none is overtaken for
    ever); a run alone waits until none is in flight and excludes every other."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = self._runs = 0
        self._alone = False
        self._queue: collections.deque[object] = collections.deque()
        self._room, self._measured, self._limit = 0, -_REMEASURE_S, None

    def _refresh(self) -> None:
        """The room, measured while no run is in flight: ``(ceiling - base) // local_world_size()``."""
        limit = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if limit == self._limit and time.monotonic() - self._measured < _REMEASURE_S:
            return
        room = (ceiling() - uid_tasks()) // local_world_size()
        self._room, self._measured, self._limit = room, time.monotonic(), limit

    def _fits(self, ticket: object, nproc: int, alone: bool) -> bool:
        if self._alone or self._queue[0] is not ticket:  # arrival order
            return False
        if self._runs == 0:  # a run always gets in alone: none waits for ever
            self._refresh()
            return True
        return not alone and self._held + nproc <= self._room

    @contextlib.contextmanager
    def admitted(self, nproc: int, alone: bool = False) -> Iterator[None]:
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            try:
                while not self._fits(ticket, nproc, alone):
                    self._cond.wait()
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()  # the next in line may fit too
            self._held, self._runs, self._alone = self._held + nproc, self._runs + 1, alone
        try:
            yield
        finally:
            with self._cond:
                self._held, self._runs = self._held - nproc, self._runs - 1
                self._alone = self._alone and not alone
                self._cond.notify_all()


_GATE = _Gate()
_RERUNS = [0]


def reruns() -> int:
    """Runs (or graded programs) run again alone in this process."""
    return _RERUNS[0]


def _count_rerun() -> None:
    _RERUNS[0] += 1
    count = _RERUNS[0]
    if count & (count - 1) == 0:  # 1, 2, 4, 8, ...: visible, never a flood
        _LOGGER.warning(
            "sandbox: %d run(s) had a thread or process refused while sharing the uid's process budget and were "
            "run again alone (docs/sandbox.md, 'Process budgets as a non-root uid')",
            count,
        )


def launch(run: Callable[[], RunResult], limits: Limits, payload: dict, progress: Progress | None) -> RunResult:
    """``run()`` (one launch) once admitted; run once more alone where it shared the uid's budget, had a thread
    or process refused and failed, unless ``judged`` decides that (or its output was consumed while it ran)."""
    if os.geteuid() == 0:
        return run()
    scope: _Note | None = getattr(_LOCAL, "scope", None)
    note = _Note()
    charge = limits.nproc + _TRAINER_TASKS_PER_RUN
    with _GATE.admitted(charge, alone=scope is not None and scope.alone), _CONTENTION.polled():
        _LOCAL.note, seen = note, _CONTENTION.count()
        try:
            result = run()
        finally:
            _LOCAL.note = None
    if scope is not None:
        scope.refused = scope.refused or note.refused
        return result
    streamed = progress is not None and progress.stop is not None  # a caller grading it as it ran
    graded_here = payload.get("mode") == "script" and result.status == "ok"
    if not note.refused or streamed or graded_here or result.status == "infra_error":
        return result
    if not _CONTENTION.since(seen):  # nothing the trainer saw could have refused it: a forged flag
        return result
    _count_rerun()
    with _GATE.admitted(charge, alone=True):
        return run()


def judged(grade: Callable[[], _T], settled: Callable[[_T], bool]) -> _T:
    """``grade()`` (one program against its tests); graded once more, each of its runs alone, where a run shared
    the uid's budget and had a thread or process refused and ``settled`` (passed, or an infrastructure error)
    does not hold. The second verdict stands."""
    if os.geteuid() == 0 or getattr(_LOCAL, "scope", None) is not None:
        return grade()
    _LOCAL.scope, seen = (scope := _Note()), _CONTENTION.count()
    try:
        report = grade()
    finally:
        _LOCAL.scope = None
    if not scope.refused or settled(report) or not _CONTENTION.since(seen):
        return report
    _count_rerun()
    _LOCAL.scope = _Note(alone=True)
    try:
        return grade()
    finally:
        _LOCAL.scope = None
