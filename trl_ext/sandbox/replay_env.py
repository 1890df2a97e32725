"""The test's environment around the program's calls, in an assert-test evaluation (``replay.py``): what one
interpreter shares between a test and the program it calls, carried across the sandbox boundary or refused.

- ``sys.stdout``: when the test has replaced it (``contextlib.redirect_stdout``, ``sys.stdout = io.StringIO()``),
  the call runs with a string buffer as the program's ``sys.stdout`` and what it printed is written into the test's
  stream when the call's result is replayed (writes to file descriptor 1 or ``sys.__stdout__`` reach neither, as in
  CPython, where they go to the real stdout). More than 65,536 characters in one call (``_harness_runtime._MAX_CAPTURE``): ``unsupported``.
- ``sys.stdin``: when the test has replaced it by an ``io.StringIO``, what is left of it (at most ``MAX_STDIN``
  characters) goes with the call as the program's ``sys.stdin``, and the test's stream is advanced by what the
  program read; any other replacement: ``unsupported``.
- Clocks: ``time.time``/``perf_counter``/``monotonic``/``process_time``/``thread_time`` (and ``_ns``) read the real
  clock plus the time every replayed call took in the sandbox (measured by the harness), so a test timing a call
  sees the program's duration, not the instant replay.
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

import io
import sys
import time
import types
from typing import Any

MAX_STDIN = 1 << 20  # characters of the test's stdin sent with one call
_CLOCKS = ("time", "perf_counter", "monotonic", "process_time", "thread_time")
_STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}
_MISSING = object()


class Unsupported(Exception):
    """The test does something around a call that cannot cross the sandbox boundary."""


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


def _like(real: Any, clock: Any) -> Any:
    """``clock`` named as ``real`` (``time.perf_counter``): a standard-library object, which the program's own
    ``from time import perf_counter`` would bind too (see ``_shared``)."""
    clock.__module__, clock.__name__, clock.__qualname__ = "time", real.__name__, real.__name__
    return clock


class Environment:
    """One evaluation's environment: ``install`` before the test runs, ``restore`` after (also when it raises)."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module, self.namespace = module, module.__dict__
        self.elapsed = 0.0  # seconds the replayed calls took in the sandbox
        self.bound: dict[str, str | None] = {}  # name -> what the test bound there (``_shared``)
        self._initial: dict[str, Any] = {}
        self._saved: dict[str, Any] = {}
        self._stdin: tuple[Any, int, int] | None = None

    def install(self) -> None:
        """Called once the stand-ins are in the namespace: what is there now is not the test's binding."""
        self._initial = dict(self.namespace)
        self._saved = {"main": sys.modules.get("__main__"), "stdout": sys.stdout, "stdin": sys.stdin}
        self._saved.update({name: getattr(time, name) for name in _CLOCKS})
        self._saved.update({name + "_ns": getattr(time, name + "_ns") for name in _CLOCKS})
        for name in _CLOCKS:
            setattr(time, name, self._clock(self._saved[name]))
            setattr(time, name + "_ns", self._clock_ns(self._saved[name + "_ns"]))
        sys.modules["__main__"] = self.module

    def restore(self) -> None:
        if not self._saved:
            return
        for name in _CLOCKS:
            setattr(time, name, self._saved[name])
            setattr(time, name + "_ns", self._saved[name + "_ns"])
        if self._saved["main"] is not None:
            sys.modules["__main__"] = self._saved["main"]
        sys.stdout, sys.stdin = self._saved["stdout"], self._saved["stdin"]
        self._saved = {}

    def _clock(self, real):
        return _like(real, lambda: real() + self.elapsed)

    def _clock_ns(self, real):
        return _like(real, lambda: real() + int(self.elapsed * 1e9))

    def note_bindings(self) -> None:
        """Before a call: the globals the test has bound (or rebound) so far."""
        for name, value in self.namespace.items():
            if self._initial.get(name, _MISSING) is value:
                continue
            if self.bound.setdefault(name, _shared(value)) != _shared(value):
                self.bound[name] = None  # bound to two things: the test's own

    def around_call(self) -> dict | None:
        """What goes with the next call: {"out": True} when the test captures stdout, {"in": text} with what is
        left of the test's stdin; None when the test changed neither. Raises ``Unsupported``."""
        around: dict[str, Any] = {}
        if sys.stdout is not self._saved.get("stdout") and sys.stdout is not None:
            around["out"] = True
        stdin, self._stdin = sys.stdin, None
        if stdin is not self._saved.get("stdin") and stdin is not None:
            if type(stdin) is not io.StringIO:
                raise Unsupported(f"the test sets sys.stdin to a {type(stdin).__name__}; only io.StringIO crosses")
            try:
                start = stdin.tell()
                text = stdin.read(MAX_STDIN + 1)
                stdin.seek(start)
            except ValueError as exc:  # closed: the program's read would raise, which cannot cross either
                raise Unsupported(f"the test's sys.stdin cannot be read ({exc})") from None
            if len(text) > MAX_STDIN:
                raise Unsupported(f"the test's sys.stdin holds more than {MAX_STDIN} characters")
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
            sys.stdout.write(env["out"])


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


def raised_by(exc: BaseException, code: types.CodeType) -> bool:
    """Whether ``exc`` passed through a frame running ``code`` (a stand-in: the program's call raised it)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False
