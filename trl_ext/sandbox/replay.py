"""Judge-side evaluation of assert-style tests (HumanEval's ``check(candidate)``, MBPP's asserts) by record and replay:
the test code runs here, in a trusted process that never executes the program, against stand-ins of the program's
functions; the sandbox only runs the calls the stand-ins asked for and sends the results back as plain data
(``plain_data.decode``).

One evaluation either finishes (passed / failed) or lists the calls it made ("incomplete"): a stand-in meeting a call
with no result yet returns a ``_Pending`` placeholder that absorbs every operation, and a failing ``assert`` is
skipped while placeholders are about, so one pass usually finds every call of the test. The judge runs the whole
sequence of calls, in order, in one fresh sandbox (stateful functions behave as in one interpreter) and evaluates
again; the verdict comes only from a pass that met no placeholder. The objects that crossed live for the whole
run on both sides (``live.py``): each call carries the test's changes to them, each record the program's, and
each item of an iterator the program returned is a call of its own.

Stdlib only, and no trl_ext import but its plain-data codec (``plain_data.py``, the file next to it): ``judge.py``
imports it as a module, and the evaluation worker runs its file (``python -s replay.py``), killed at a deadline so
that no test can hang the trainer.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import os
import random
import sys
import threading
import time
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox import program_exceptions as _exceptions
    from trl_ext.sandbox import replay_env
    from trl_ext.sandbox.live import LiveObjects, ProgramIterator
    from trl_ext.sandbox.pending import _contains_pending, _Pending
    from trl_ext.sandbox.plain_data import decode, decode_record, encode, encode_call
else:  # the evaluation worker runs this file by its path: the codec is the file next to it (read by its path:
    # a confined worker may read that file but not list its directory, which an import through sys.path needs)
    import importlib.util

    def _sibling(name: str) -> Any:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
        spec = importlib.util.spec_from_file_location("trl_ext_" + name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclass-free, but `from __future__ import annotations` looks itself up
        spec.loader.exec_module(module)
        return module

    _sibling("program_sets"), _sibling("plain_encode")  # what plain_data.py reads, first
    _sibling("dict_versions"), _sibling("module_watch")  # what replay_env.py reads, first
    _codec, replay_env = _sibling("plain_data"), _sibling("replay_env")
    decode, decode_record, encode, encode_call = _codec.decode, _codec.decode_record, _codec.encode, _codec.encode_call
    _exceptions = _sibling("program_exceptions")  # after plain_data.py, which it reads
    _pending = _sibling("pending")
    _contains_pending, _Pending = _pending._contains_pending, _pending._Pending
    _live = _sibling("live")
    LiveObjects, ProgramIterator = _live.LiveObjects, _live.ProgramIterator
stand_ins = _exceptions.stand_ins
_program_exception, exception_details = _exceptions._program_exception, _exceptions.exception_details

_MAX_CALLS = 20000
ASSERT_HOOK = "__trl_ext_assert_failed__"


_KEY_TEXT = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps's, made once (not an encoder per call)


def call_key(name: str, args: Any, kwargs: Any, sync: Any = None) -> str:
    """The key of one call: its function name, encoded arguments and the test's changes to numbered objects."""
    return _KEY_TEXT([name, args, kwargs, sync])


# -- the test, rewritten -------------------------------------------------------------------------------------


class _AssertToCall(ast.NodeTransformer):
    """``assert test, msg`` -> ``if not test: __trl_ext_assert_failed__(msg)`` (the hook decides)."""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.generic_visit(node)
        message = node.msg or ast.Constant(None)
        hook = ast.Call(ast.Name(ASSERT_HOOK, ast.Load()), [message], [])
        return ast.copy_location(ast.If(ast.UnaryOp(ast.Not(), node.test), [ast.Expr(hook)], []), node)

    visit_Compare = _exceptions._sets.identity_visit  # ``a is b``: judged by the hook ``stand_ins`` binds


def rewrite_asserts(test: str) -> ast.Module:
    """The test's AST with every assert statement routed through the assert hook."""
    return ast.fix_missing_locations(_AssertToCall().visit(ast.parse(test)))


@functools.lru_cache(maxsize=256)
def _compiled(test: str, prefix: str | None) -> tuple[Any, Any]:
    """Code objects of the rewritten test and of the prefix (each test is evaluated several times)."""
    return compile(rewrite_asserts(test), "tests.py", "exec"), prefix and compile(prefix, "prefix.py", "exec")


def prepare(test: str, prefix: str | None, names: list) -> None:
    """Compute ahead what an evaluation reads of the dataset's test, prefix and names alone (code, unbound builtins,
    real types): the worker calls it before each fork, so every evaluation finds them cached. Raises as they do."""
    _compiled(test, prefix)
    _exceptions._free_reads(test, prefix or "")
    _exceptions.real_types(test, prefix or "", tuple(names))


# -- one evaluation --------------------------------------------------------------------------------------------


class _Stop(BaseException):
    """Unwinds the test (past its own ``except Exception``) once the verdict is already known."""


class _Session:
    """The stand-ins' shared state for one evaluation. Calls form one ordered sequence, as one interpreter would
    make them (identical calls are not merged: a function may keep state); the k-th result of the last sandbox
    run is used only by the k-th call, and only while this pass has made the same calls in the same order."""

    stop = _Stop

    def __init__(self, calls: list[list], results: list[dict]) -> None:
        self.known = [call_key(*call[:4]) for call in calls]
        self.known_around = [call[4:] for call in calls]  # what went with each call besides its arguments
        self.environment: Any = None  # replay_env.Environment: the test's streams, clocks and names
        self.results = results
        self.skipped = 0  # steps of the run after a generator's end that this pass does not make (no-ops)
        self.calls: list[list] = []  # [name, args, kwargs, sync(, around)] of every call of this pass, in order
        self.pending = False  # a placeholder was handed out: no verdict from this pass
        self.frontier = 0  # position of the first placeholder: each sandbox run must move it further
        self.blocked = False  # a call's arguments hold a placeholder: run what is known, then go on
        self.rejected = ""  # the program's fault: a result that is no plain data, or a call with no record
        self.unsupported = ""  # the test's: an argument that is no plain data, too many calls
        self.nans: dict[int, float] = {}  # the run's NaN objects, one each (identity decides `[x] == [x]`)
        self.classes: dict = {"refuse": self.refuse}  # the program's namedtuple and builtin-subclass classes
        self.classes["now"] = self.calls.__len__  # a subclass value is true until the program's next call
        self.exception_classes: dict = {"refuse": self.refuse}  # stand-ins of its exception classes, by chain
        self.live = LiveObjects()  # the run's numbered objects, as the program last saw them (``live.py``)
        self.live.graph[0]["nans"] = self.nans  # a NaN argument crosses by its number (``plain_encode.encode``)
        self.busy = self.done = False  # in a call (an iterator dropped then is released after it); finished
        self.halts: dict[int, str] = {}  # where the run must end unless the result is as guessed (``_Guessed``)
        self.decimals: Any = None  # replay_env.DecimalWatch: the program's decimal context, changed?

    def stand_in(self, name: str):
        def stand_in(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, args, kwargs)

        stand_in.__name__ = stand_in.__qualname__ = name
        stand_in.__module__ = "__main__"  # the program's functions live in the test's module in one interpreter
        return stand_in

    def refuse(self, why: str) -> None:
        """The test needs what only the program's code could make (an instance of its own exception class)."""
        self.unsupported = why
        raise _Stop

    def assert_failed(self, message: Any = None) -> None:
        if not self.pending:  # with placeholders about, a failure proves nothing: keep discovering calls
            raise AssertionError(message) if message is not None else AssertionError

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        self.busy = True
        try:
            result = self._call(name, args, kwargs)
        finally:
            self.busy = False
        while self.live.dropped and not self.done:  # iterators the call's updates dropped: released in order
            self.release(self.live.dropped.pop(0))
        return result

    def release(self, number: int, value: Any = None, explicit: bool = False) -> None:
        """The test dropped the program's iterator ``number``: the sandbox drops it too (a call of the run, where
        a generator's ``finally`` runs unless the program holds it), unless it ended (nothing runs then).
        ``explicit``: the test called ``close()`` (generators only): a call of the run that closes it there and
        raises here what its clean-up raised (only a drop swallows that); the test still holds it."""
        if explicit:
            if number not in self.live.generators:
                self.refuse("the test closes an iterator of the program that is no generator")
            if number not in self.live.ended:
                try:
                    self.call("", (number, 1), {})
                finally:
                    self.live.ended.add(number)
            return
        self.live.forget(number, value)
        if self.done or number in self.live.ended:
            return
        if self.busy:
            self.live.dropped.append(number)
            return
        try:
            self.call("", (number, 0), {})
            self.live.ended.add(number)  # closed: dropping it later runs nothing
        except _Stop:  # from __del__: the reason is set (rejected, unsupported or blocked), the pass goes on
            pass
        except Exception:  # noqa: BLE001 - an exception in a generator's clean-up is not raised, as in CPython
            pass

    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        if _contains_pending((args, kwargs)):
            self.blocked = True
            raise _Stop
        around = self._around_call(name)
        position = len(self.calls)
        if position >= _MAX_CALLS:
            self.unsupported = f"the test makes more than {_MAX_CALLS} calls"
            raise _Stop
        try:  # the test's changes to numbered objects first, then the arguments (one run-wide graph)
            sync = self.live.test_changes()
            encoded_args, encoded_kwargs, _ = encode_call(args, kwargs, self.live.graph)
        except TypeError as exc:
            self.unsupported = f"an argument of {name or 'an iterator'}() is not plain data ({exc})"
            raise _Stop from None
        entry = [name, encoded_args, encoded_kwargs, sync]
        self.calls.append([*entry, *around])
        run, key = position + self.skipped, call_key(*entry)  # the position of this call in the last run
        while not self.pending and run < len(self.results) and self.known[run] != key and self._no_op(run):
            self.skipped, run = self.skipped + 1, run + 1
        same_so_far = not self.pending and run < len(self.known) and run < len(self.results)
        same_so_far = same_so_far and self.known_around[run] == around
        if not same_so_far or self.known[run] != key:
            self.frontier = position if not self.pending else self.frontier  # the first call with no result
            self.pending = True  # from here on this pass differs from the run: the next run replays it all
            if name == "" and len(args) == 1:  # an item not known yet: the run asks for more; this pass sees the end
                self._ask_ahead(args[0])
                raise StopIteration
            return _Guessed(self.halts, position)
        self._after_call(name, self.results[run])
        if self.decimals is not None and self.decimals.after(self.results, run):
            self.refuse(self.decimals.after(self.results, run))
        return self._replay(name, self.results[run], sync)

    def _no_op(self, run: int) -> bool:
        """Whether the run's call ``run`` asked an ended generator for one more item (asked ahead, beyond what
        this pass takes): nothing runs then, so the results after it are those of a run without it. Its record
        is applied all the same (its numbers), unseen by the test."""
        record = self.results[run]
        step = json.loads(self.known[run])  # ["", [number]] asks for an item, ["", [number, 0]] drops it
        number = step[1][0] if step[0] == "" and step[1] in ([step[1][0]], [step[1][0], 0]) else None
        if number not in self.live.generators or number not in self.live.ended or record.get("upd") != []:
            return False
        if "made" in record:
            return False
        if record.get("raised") != "StopIteration" and (len(step[1]) == 1 or record.get("ok") is not True):
            return False
        try:
            self.live.apply(record, [], {"nans": self.nans, "live": self._iterator, "classes": self.classes})
        except ValueError:
            return False
        return True

    def step(self, number: int, *sent: Any) -> Any:
        """The next item of the program's iterator ``number``, or what ``sent`` asks (live.py): a run's call ("")."""
        self.live.steps[number] = self.live.steps.get(number, 0) + 1
        return self.call("", (number, *sent), {})

    def _ask_ahead(self, number: int) -> None:
        """Ask the run for more items of an iterator after the one not known yet (twice as many as the test took so
        far, at least 16): at the end of the sequence, so they change no result before them, and a next pass uses
        them only while it asks for them in the same order."""
        more = min(max(15, self.live.steps[number]), 4095, _MAX_CALLS - len(self.calls))
        self.calls += [["", [number], {"d": []}, []] for _ in range(more)]
        if more:  # the calls this pass makes after these assume the iterator ends among them
            self.halts[len(self.calls) - 1] = "more"

    def _around_call(self, name: str) -> list:
        """Before a call (``replay_env``): note the names the test bound; [what goes with the call] when the test
        changed its stdout or stdin, else []. A test whose streams cannot cross is unsupported."""
        if self.environment is None:
            return []
        self.environment.note_bindings()
        try:
            self.environment.check_modules()
            around = self.environment.around_call()
        except replay_env.Unsupported as exc:
            self.unsupported = f"{exc} (calling {name}())"
            raise _Stop from None
        return [around] if around else []

    def _after_call(self, name: str, record: dict) -> None:
        """When a call's result is replayed: its duration on the test's clocks, its output, its stdin reads."""
        if self.environment is None:
            return
        try:
            self.environment.after_call(record)
        except replay_env.Unsupported as exc:
            self.unsupported = f"{exc} (calling {name}())"
            raise _Stop from None
        except replay_env.ProgramFault as exc:
            self.rejected = f"{name}(): {exc}"
            raise _Stop from None

    def _replay(self, name: str, record: dict, sync: list) -> Any:
        ok, raised = record.get("ok") is True, record.get("raised")
        what = f"{name}()" if name else "an iterator of the program"
        if not ok and type(raised) is not str:
            why = "returned no plain data" if record.get("unencodable") else "gave no result"
            self.rejected = f"{what} {why}"
            raise _Stop
        memo = {"nans": self.nans, "live": self._iterator, "classes": self.classes}
        try:  # the numbered objects the call changed are updated in place (a raising call's changes too)
            decoded = self.live.apply(record, sync, memo)
            details = None if ok else exception_details(record, memo)
        except ValueError:
            self.rejected = f"{what} returned no plain data"
            raise _Stop from None
        if ok:
            return decoded
        if record.get("made") is True and name:  # the call returned an exception (the test made one: ``stand_ins``)
            return _program_exception(raised, name, decoded, details, self.exception_classes)
        if not name:  # the program's iterator ended (or raised: it is then finished too)
            self.live.ended.add(self.calls[-1][1][0])
        if not name and raised == "StopIteration" and "cls" not in record and type(decoded) is not list:
            raise StopIteration  # a bare end (a value crosses as "exc": a generator's return, ``yield from``'s)
        raise _program_exception(raised, name, decoded, details, self.exception_classes)

    def _iterator(self, number: int, classes: list | None) -> ProgramIterator:
        return self.live.iterator(number, classes, self.step, self.release, self.exception_classes)


class _Guessed(_Pending):
    """A result not known yet. A pass that iterates it sees no item and goes on guessing; if the program returns an
    iterator there, its items come before the calls guessed after it, so the run ends after this call (halt
    "live"): no run shows the program a call that a later run would place after new calls (``RunHistory``)."""

    def __init__(self, halts: dict, position: int) -> None:
        self._halts, self._position = halts, position

    def __iter__(self):
        self._halts.setdefault(self._position, "live")
        return iter(())


_STAND_IN_CODE = _Session.stand_in(None, "").__code__  # a SystemExit through this code is the program's


def evaluate(task: dict) -> dict:
    """Evaluate one assert test with the results known so far.

    ``task``: {"test", "prefix", "entry_point", "names" (the program's functions), "modules" (standard modules
    the test uses without importing them), "seed" (of the test's ``random``), "calls" (the calls of the last sandbox
    run, in order) and "results" (their records, in the same order)}. Returns {"verdict": "passed" |
    "failed" | "incomplete" | "unsupported", "detail", "calls": [[name, args, kwargs, want_args], ...] (a fifth
    item where the test replaced its stdout, stderr or stdin: ``replay_env.Environment.around_call``), for
    "incomplete" "frontier": the position of the first call with no result, and for a verdict "bound": the globals
    the test bound before its calls (``replay_env``)} (the worker answers "error" if this function itself fails)."""
    random.seed(task["seed"])  # the same in every pass, secret to the program (its inputs are not known ahead)
    session = _Session(task.get("calls", []), task.get("results", []))
    session.decimals = replay_env.DecimalWatch(task["test"] + "\n" + (task.get("prefix") or ""))
    module = session.module = type(sys)("__main__")  # sys.modules["__main__"] while the test runs: unittest.main()
    namespace: dict[str, Any] = module.__dict__
    namespace["__builtins__"] = builtins
    environment = replay_env.Environment(module)
    try:
        error = _run_test(task, session, environment)
    finally:
        environment.restore()
    session.done = True  # iterators the namespace drops from here on end no call
    calls = session.calls
    if session.rejected:
        return {"verdict": "failed", "detail": session.rejected, "calls": calls}
    if session.unsupported:
        return {"verdict": "unsupported", "detail": session.unsupported, "calls": calls}
    if session.pending or session.blocked:
        halts = sorted(session.halts.items())
        return {
            "verdict": "incomplete",
            "detail": error or "",
            "calls": calls,
            "frontier": session.frontier,
            "halts": halts,
        }
    if "program" not in task and not calls:  # the test used the program's names without a call: what are they?
        return {"verdict": "incomplete", "detail": error or "", "calls": calls, "describe": True}
    answer = {"verdict": "failed" if error else "passed", "detail": error or "", "calls": calls}
    if error is None:
        answer.update(verdict="unsupported", detail="the test exits with a status past a C long")
    return {**answer, "bound": environment.bound}


def _run_test(task: dict, session: _Session, environment: Any) -> str | None:
    """Run the test in ``session.module``; '' when it ended well (or exited with status 0 by itself), else why
    not (None: an exit status that cannot be told)."""
    namespace = session.module.__dict__
    try:
        test_code, prefix_code = _compiled(task["test"], task.get("prefix"))
        if prefix_code:
            exec(prefix_code, namespace)
        for module in task.get("modules", ()):
            namespace[module] = __import__(module)
        namespace.update(stand_ins(session, task))
        namespace[ASSERT_HOOK] = session.assert_failed
        session.environment = environment
        environment.install()
        exec(test_code, namespace)
        if task.get("entry_point"):
            namespace["check"](namespace[task["entry_point"]])
    except _Stop:
        return "stopped"
    except SystemExit as exc:  # as CPython's exit status: 0 passes, unless the program raised it
        passes = replay_env.exit_passes(exc) and not replay_env.raised_by(exc, _STAND_IN_CODE, _exceptions.REBUILT)
        return "" if passes else None if passes is None else f"SystemExit: {exc}"[:500]
    except BaseException as exc:  # noqa: B036 - KeyboardInterrupt & co
        return f"{type(exc).__name__}: {exc}"[:500]
    return ""  # names the test binds after its last call reach no program code: only those before a call count


# -- the worker process ------------------------------------------------------------------------------------------

_WORKER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "PYTHONHASHSEED": "0",
}


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def worker_argv() -> list[str]:
    """The command of an evaluation worker: this file as a script."""
    return [sys.executable, "-s", os.path.abspath(__file__)]


def worker_main() -> None:
    """JSON task per line on stdin -> JSON answer per line. Re-executes itself once with a fixed hash seed (set
    iteration orders must agree between passes) and an environment without the trainer's variables."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, worker_argv(), _WORKER_ENV)
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # the test's imports must not find this package's modules by their bare names
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the test's prints must not corrupt the protocol
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    sys.setrecursionlimit(10000)
    out.write('{"ready": true}\n')
    for line in sys.stdin:
        try:
            answer = evaluate(json.loads(line))
        except Exception as exc:  # a bug here must not look like the program's timeout
            answer = {"verdict": "error", "detail": f"evaluation failed: {type(exc).__name__}"[:500], "calls": []}
        out.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    worker_main()
