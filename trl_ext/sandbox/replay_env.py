"""The test's environment around the program's calls, in an assert-test evaluation (``replay.py``): what one
interpreter shares between a test and the program it calls, carried across the sandbox boundary or refused.

- ``sys.stdout`` (and ``sys.stderr``, alike): when the test has replaced it (``contextlib.redirect_stdout``, ``sys.stdout = io.StringIO()``),
  the call runs with a string buffer as the program's ``sys.stdout`` and what it printed is written into the test's
  stream when the call's result is replayed (writes to file descriptor 1 or ``sys.__stdout__`` reach neither, as in
  CPython, where they go to the real stdout). More than 65,536 characters in one call (``_harness_runtime._MAX_CAPTURE``): ``unsupported``.
- ``sys.stdin``: when the test has replaced it by an ``io.StringIO``, what is left of it (at most ``MAX_STDIN``
  characters) goes with the call as the program's ``sys.stdin``, and the test's stream is advanced by what the
  program read; any other replacement: ``unsupported``.
- Clocks: ``time.time``/``perf_counter``/``monotonic``/``process_time``/``thread_time`` (and ``_ns``), ``os.times``,
  ``resource.getrusage``,
  ``time.localtime``/``gmtime``/``ctime``/``strftime`` and ``datetime.datetime.now``/``utcnow``/``today`` read the
  real clock plus the wall time every replayed call took in the sandbox (measured by the harness), so a test
  timing a call sees the program's duration, not the instant replay (CPU clocks advance by the wall time too).
- Names: every global the test binds by the time it calls the program (a function of its own, ``g = lambda: 2``,
  ``globals()['g'] = ...``) is reported, so the judge can refuse a test whose bindings the program's own code would
  read in one interpreter (``assert_plan.shadowed_names``), unless the program's own import binds that name to
  the same module or standard-library object.
- ``sys.exit``/``SystemExit`` raised by the test itself ends it as CPython's exit status does (0 or None: passed);
  one raised by the program's call (replayed) is a failure. ``sys.modules['__main__']`` is the test's namespace,
  so ``unittest.main()`` finds the test's ``TestCase`` classes.

Stdlib only: ``replay.py`` loads this file by its path in the evaluation worker, as it loads ``plain_data.py``.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import os
import resource
import signal
import sys
import threading
import time
import tracemalloc
import types
import warnings
from collections.abc import Callable
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox import module_watch
else:  # the evaluation worker: loaded by its path (``replay.py``), after module_watch.py
    module_watch = sys.modules["trl_ext_module_watch"]

MAX_STDIN = 1 << 20  # characters of the test's stdin sent with one call
_CLOCKS = ("time", "perf_counter", "monotonic", "process_time", "thread_time")
_TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
_STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}
_MISSING = object()


Unsupported = module_watch.Unsupported  # the test does something around a call that cannot cross the boundary


class ProgramFault(Exception):
    """The program's record about the test's streams is unusable (the program broke its buffers)."""


def _shared(value: Any) -> str | None:
    """What the program's own import would bind for this very object: "module:NAME" for a module, "MODULE.NAME"
    for a standard-library function or class; None for the test's own objects (``assert_plan.shadowed_names``
    compares it with the program's imports)."""
    if isinstance(value, types.ModuleType):
        return "module:" + str(getattr(value, "__name__", ""))
    if not isinstance(value, (type, types.BuiltinFunctionType, types.FunctionType)):
        return None
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str) or module.partition(".")[0] not in _STDLIB:
        return None
    return f"{module}.{name}"


# builtins the checks use, as they were: a test may patch builtins (which is what they look for)
_any, _isinstance, _getattr, _type = any, isinstance, getattr, type


def _virtual_clocks(elapsed: Callable[[], float]) -> list[tuple[Any, str, Any]]:
    """(owner, name, replacement) of every clock a test may read: the real one plus ``elapsed()`` seconds."""
    patches: list[tuple[Any, str, Any]] = []
    for name in _CLOCKS:
        real, real_ns = getattr(time, name), getattr(time, name + "_ns")
        patches.append((time, name, _like(real, lambda real=real: real() + elapsed())))
        patches.append((time, name + "_ns", _like(real_ns, lambda real=real_ns: real() + int(elapsed() * 1e9))))
    gettime, gettime_ns, times = time.clock_gettime, time.clock_gettime_ns, os.times
    patches.append((time, "clock_gettime", _like(gettime, lambda clock: gettime(clock) + elapsed())))
    patches.append(
        (time, "clock_gettime_ns", _like(gettime_ns, lambda clock: gettime_ns(clock) + int(elapsed() * 1e9)))
    )
    patches.append((os, "times", _like(times, lambda: _later_times(times(), elapsed()))))
    usage = resource.getrusage  # red team round 9: a CPU bound read through getrusage saw no replayed call's cost
    patches.append((resource, "getrusage", _like(usage, lambda who: _later_usage(usage(who), who, elapsed()))))
    now = patches[0][2]  # time.time
    for name in ("localtime", "gmtime", "ctime"):
        real = getattr(time, name)
        patches.append((time, name, _like(real, lambda secs=None, real=real: real(now() if secs is None else secs))))
    strftime = time.strftime
    clock = _like(strftime, lambda fmt, *t: strftime(fmt, *t) if t else strftime(fmt, time.localtime()))
    patches.append((time, "strftime", clock))
    patches.append((datetime, "datetime", _virtual_datetime(elapsed)))
    return patches


def _later_times(real: Any, seconds: float) -> Any:
    """``os.times()`` ``seconds`` later: the user CPU time and the elapsed time advanced (as the CPU clocks are)."""
    return _type(real)(
        (real.user + seconds, real.system, real.children_user, real.children_system, real.elapsed + seconds)
    )


def _later_usage(real: Any, who: int, seconds: float) -> Any:
    """``resource.getrusage(who)`` ``seconds`` later: this process's (or thread's) user CPU time advanced, as the
    CPU clocks are; the children's usage as it is (a replayed call runs no child of the test)."""
    if who == resource.RUSAGE_CHILDREN:
        return real
    return _type(real)((real.ru_utime + seconds, *real[1:]))


def _virtual_datetime(elapsed: Callable[[], float]) -> type:
    """``datetime.datetime`` whose ``now``/``utcnow``/``today`` are ``elapsed()`` seconds later."""

    class VirtualDatetime(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return super().now(tz) + datetime.timedelta(seconds=elapsed())

        @classmethod
        def utcnow(cls) -> Any:
            return super().utcnow() + datetime.timedelta(seconds=elapsed())

        @classmethod
        def today(cls) -> Any:
            return super().today() + datetime.timedelta(seconds=elapsed())

    VirtualDatetime.__module__, VirtualDatetime.__name__, VirtualDatetime.__qualname__ = ("datetime",) * 3
    return VirtualDatetime


def _like(real: Any, clock: Any) -> Any:
    """``clock`` named as ``real`` (``time.perf_counter``): a standard-library object, which the program's own
    ``from time import perf_counter`` would bind too (see ``_shared``)."""
    clock.__module__, clock.__name__, clock.__qualname__ = "time", real.__name__, real.__name__
    return clock


_INSTALLED: list = []  # [the Environment installed now]: whose replayed calls the virtual clocks add


def _installed_elapsed() -> float:
    return _INSTALLED[0].elapsed if _INSTALLED else 0.0


# made once, from the genuine clocks (a fork of the evaluation worker finds them made; no class built per evaluation)
_CLOCK_PATCHES = tuple(_virtual_clocks(_installed_elapsed))
_CLOCKS_FOR_GOOD: list[bool] = []  # [True] once ``watch_modules`` put the virtual clocks in place for good


def watch_modules() -> None:
    """The evaluation worker's preparation, once before it forks a process per evaluation: the virtual clocks put
    in place for good (while no evaluation is installed they read the real clock), so that an evaluation neither
    patches nor puts back a dozen module attributes (each write copies a page of the worker's memory in the
    evaluation's process), then every module loaded watched and remembered as it is (``module_watch.py``)."""
    for owner, name, value in _CLOCK_PATCHES:
        setattr(owner, name, value)
    _CLOCKS_FOR_GOOD[:] = [True]
    module_watch.watch_modules()


class Environment:
    """One evaluation's environment: ``install`` before the test runs, ``restore`` after (also when it raises)."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module, self.namespace = module, module.__dict__
        self.elapsed = 0.0  # seconds the replayed calls took in the sandbox
        self.bound: dict[str, str | None] = {}  # name -> what the test bound there (``_shared``)
        self._initial: dict[str, Any] = {}
        self._saved: list[tuple[Any, str, Any]] = []  # (owner, name, value) to put back
        self._streams: dict[str, Any] = {}  # the streams as the evaluation found them
        self._checks = module_watch.ModuleChecks(self.namespace)
        self._noted = None  # the version of the test's globals when ``note_bindings`` last read them
        self._stdin: tuple[Any, int, int] | None = None
        self._stdin_sent = 0  # characters of the test's stdin sent with the calls so far

    def install(self) -> None:
        """Called once the stand-ins are in the namespace: what is there now is not the test's binding."""
        self._initial = dict(self.namespace)
        self._streams = {"out": sys.stdout, "err": sys.stderr, "in": sys.stdin}
        _INSTALLED[:] = [self]
        self._outputs = _outputs_seen()
        patches = [] if _CLOCKS_FOR_GOOD else list(_CLOCK_PATCHES)
        self._saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
        self._saved.append((sys.modules, "__main__", sys.modules.get("__main__")))
        patches.append((sys, "argv", ["tests.py"]))  # as a test file run by python (unittest.main() reads it)
        self._saved.append((sys, "argv", sys.argv))
        for owner, name, value in patches:
            setattr(owner, name, value)
        modules_before = module_watch.modules_version_now()
        sys.modules["__main__"] = self.module
        self._checks.start({(id(owner), name) for owner, name, _ in self._saved}, modules_before)  # checks them

    def restore(self) -> None:
        self._checks.stop()
        if _INSTALLED and _INSTALLED[0] is self:
            _INSTALLED.clear()
        for owner, name, value in reversed(self._saved):
            if owner is sys.modules:
                sys.modules[name] = value
            else:
                setattr(owner, name, value)
        if self._saved:
            sys.stdout, sys.stderr, sys.stdin = self._streams["out"], self._streams["err"], self._streams["in"]
        self._saved = []

    def check_modules(self) -> None:
        """Before a call: refuse a test that changed a module the program's code may read and has not put it back
        (``module_watch.ModuleChecks.check``). Raises ``Unsupported``."""
        self._checks.check()

    def note_bindings(self) -> None:
        """Before a call: the globals the test has bound (or rebound) so far (read again only once they changed)."""
        version = self._checks.namespace_version_now()
        if version is not None and version == self._noted:
            return
        self._noted = version
        for name, value in self.namespace.items():
            if self._initial.get(name, _MISSING) is value:
                continue
            if self.bound.setdefault(name, _shared(value)) != _shared(value):
                self.bound[name] = None  # bound to two things: the test's own

    def around_call(self) -> dict | None:
        """What goes with the next call: {"out": True} / {"err": True} when the test captures stdout / stderr,
        {"in": text} with what is left of the test's stdin; None when the test changed none. Raises
        ``Unsupported``."""
        _refuse_timers(self._outputs)
        around: dict[str, Any] = {}
        for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
            if stream is not self._streams.get(key) and stream is not None:
                around[key] = True
        stdin, self._stdin = sys.stdin, None
        if stdin is not self._streams.get("in") and stdin is not None:
            if type(stdin) is not io.StringIO:
                raise Unsupported(f"the test sets sys.stdin to a {type(stdin).__name__}; only io.StringIO crosses")
            try:
                start = stdin.tell()
                text = stdin.read(MAX_STDIN + 1)
                stdin.seek(start)
            except ValueError as exc:  # closed: the program's read would raise, which cannot cross either
                raise Unsupported(f"the test's sys.stdin cannot be read ({exc})") from None
            self._stdin_sent += len(text)
            if len(text) > MAX_STDIN or self._stdin_sent > 4 * MAX_STDIN:  # each call carries what is left
                raise Unsupported(f"the test's sys.stdin holds more than the judge sends ({MAX_STDIN} characters a "
                                  f"call, {4 * MAX_STDIN} in all)")  # fmt: skip
            around["in"], self._stdin = text, (stdin, start, len(text))
        return around or None

    def after_call(self, record: dict) -> None:
        """When the call's result is replayed: its duration, what it read of stdin and printed. Raises
        ``Unsupported`` (printed past the cap), ``ProgramFault`` (the program broke its buffers), or what the
        test's stdout raises on write (as the program's ``print`` would have)."""
        self.elapsed += record.get("dt", 0.0)
        env = record.get("env", {})
        if env.get("lost"):
            raise ProgramFault("the program broke the stdout or stdin it was given")
        if self._stdin is not None:
            stdin, start, length = self._stdin
            stdin.seek(start + min(env.get("in", 0), length))
        if env.get("more"):
            raise Unsupported("the program printed more than the judge carries into a captured stdout")
        if env.get("out"):
            sys.stdout.write(_text(env["out"]))
        if env.get("err"):
            sys.stderr.write(_text(env["err"]))


def _text(printed: Any) -> str:
    """Printed text as it crossed: a str, or with surrogates {"u": [run, code point, ...]} (checked by the trainer,
    ``records._call_environment``; joined here, where only the standard library is at hand)."""
    return printed if type(printed) is str else "".join(p if type(p) is str else chr(p) for p in printed["u"])


def _handles(logger: Any) -> bool:
    """Whether ``logger`` has a handler that does something (a library's NullHandler does not)."""
    return _any(_type(handler) is not logging.NullHandler for handler in _getattr(logger, "handlers", None) or ())


def _outputs_seen() -> tuple:
    """What of the warnings and logging machinery sees output now: the warning display, the "error" filters, the
    loggers with a handler (``_refuse_timers`` compares with this as the evaluation found it)."""
    errors = [entry for entry in warnings.filters if entry[0] == "error"]
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return warnings._showwarnmsg_impl, errors, [logger for logger in loggers if _handles(logger)]


def _refuse_timers(found: tuple) -> None:
    """A replayed call takes no time and allocates nothing here: refuse a test that bounds the call with what only
    the real call would trip (red team round 6): an armed interval timer (``signal.alarm``, ``setitimer``), a
    call from a thread of the test's (``future.result(timeout=...)``, ``thread.join(1)``), ``tracemalloc``; and one
    that would see the program's warnings or log records (an "error" filter, ``catch_warnings(record=True)``, a
    logging handler added)."""
    if _any(signal.getitimer(which)[0] for which in _TIMERS):
        raise Unsupported("the test arms a timer (signal.alarm, setitimer) around a call, which a replay cannot trip")
    if threading.current_thread() is not threading.main_thread():
        raise Unsupported("the test calls the program from a thread of its own (a wait with a timeout)")
    if tracemalloc.is_tracing():
        raise Unsupported("the test measures memory with tracemalloc around a call, which a replay cannot show")
    # the program's warnings and log records stay in the sandbox: refuse a test that would see them
    show, errors, handled = _outputs_seen()
    if show is not found[0] or errors != found[1]:
        raise Unsupported("the test turns warnings into errors or records them around a call (they do not cross)")
    if _any(logger not in found[2] for logger in handled):
        raise Unsupported("the test adds a logging handler around a call (the program's log records do not cross)")


def exit_passes(exc: SystemExit) -> bool | None:
    """Whether CPython's exit status for this ``SystemExit`` is 0 (None: it cannot tell, a code past a C long)."""
    code = exc.code
    if code is None:
        return True
    if not isinstance(code, int):  # printed, exit status 1
        return False
    if not -(1 << 63) <= code < 1 << 63:
        return None
    return int(code) & 0xFF == 0


def raised_by(exc: BaseException, code: types.CodeType, rebuilt: dict) -> bool:
    """Whether the program raised ``exc``: it is one of the program's exceptions, ``rebuilt`` from a record (by
    ``id``: whatever path of the judge raised it: a call, an item of the program's iterator, its ``close()``, a
    class of the program's that the test made; red team round 12), or it passed through a frame running ``code``
    (the function stand-in: a call)."""
    if rebuilt.get(id(exc)) is exc:
        return True
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


class DecimalWatch:
    """Refuses a test whose decimal arithmetic may read the context a program call changed (red team R8-6: the
    test's ``Decimal(1) / Decimal(3)`` ran at the judge's precision, not the program's): once a call's record says
    the program's ``decimal`` context differs from a new thread's ("dc"), a test that names decimal or holds a
    Decimal that crossed is ``unsupported_test``. The context itself does not cross."""

    def __init__(self, test: str) -> None:
        self.reads = "ecimal" in test  # ``decimal``, ``Decimal``
        self.changed = self.values = False

    def after(self, results: list, run: int) -> str:
        """Why the test is refused after the run's call ``run`` ("" if it is not)."""
        record = results[run]
        if not self.changed and record.get("dc") is True:
            self.changed = True
            self.values = any(_holds_decimal(earlier) for earlier in results[:run])
        if not self.changed:
            return ""
        self.values = self.values or _holds_decimal(record)
        if self.reads or self.values:
            return "the program changed decimal's context (precision, rounding, traps), which the test may read"
        return ""


def _holds_decimal(record: dict) -> bool:
    return '"dec"' in json.dumps(record)
