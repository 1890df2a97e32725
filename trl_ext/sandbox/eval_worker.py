"""The evaluation worker of assert tests, confined: ``replay.py``'s JSON-lines worker (unchanged protocol) started
under the strongest local sandbox, one fresh process per evaluation.

A dataset's assert test runs in this worker against stand-ins of the program's functions; a test that passes a
result to ``eval``/``exec``/``pickle.loads`` runs program-chosen code here. So the worker is sandboxed like a
program (whatever backend runs the programs, remote included): bubblewrap where it works, else landlock, with the
run's seccomp filter, no network, a read-only system, an unprivileged uid of its own when the trainer is root, an
environment built from nothing (never the trainer's: no token), rlimits, and a fresh process for every evaluation:
the worker imports ``replay.py`` once and forks a child per task (a fork server: milliseconds, where a new
interpreter costs tens), so nothing one program's data did reaches the next program's verdict. The worker
compiles each test (and its prefix) before the fork, a function of the dataset's text alone, so that a test
evaluated again (a GRPO group, a second round) is not compiled again in every child.

In every mode, an audit hook refuses a test that executes data (``compile``/``eval``/``exec`` of anything but the
test, ``pickle`` globals, ``marshal``, new code objects; from the test or any library it calls), before that code
runs: code running in the evaluating interpreter could forge the verdict, so program data never runs there. The
case fails with status ``unsupported_test`` (counted in the reward's outcomes); docs/sandbox.md, class 4. Where
neither backend can run, the worker runs unconfined (scrubbed environment, own uid as root), and a warning is
logged once per process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from trl_ext.sandbox import forkserver, landlock, seccomp
from trl_ext.sandbox._process import memfd_with
from trl_ext.sandbox.base import SandboxUnavailable, python_roots, sandbox_interpreter
from trl_ext.sandbox.held_roots import HeldRoots
from trl_ext.sandbox.limits import SAFE_ENV, UIDS, Limits
from trl_ext.sandbox.reaper import kill_session, reap_run
from trl_ext.sandbox.scratch import remove_scratch
from trl_ext.sandbox.selection import get_backend
from trl_ext.workers.pool import WorkerPool

_REPLAY = str(Path(__file__).with_name("replay.py").resolve())
_REPLAY_IN_BWRAP = "/trl_ext_replay.py"
_PLAIN_DATA = str(Path(__file__).with_name("plain_data.py").resolve())  # replay.py imports the file next to it
_PLAIN_DATA_IN_BWRAP = "/plain_data.py"
_LIVE = str(Path(__file__).with_name("live.py").resolve())  # and live.py, after it
_LIVE_IN_BWRAP = "/live.py"
_REPLAY_ENV = str(Path(__file__).with_name("replay_env.py").resolve())  # loaded by replay.py the same way
_REPLAY_ENV_IN_BWRAP = "/replay_env.py"
_EXCEPTIONS = str(Path(__file__).with_name("program_exceptions.py").resolve())  # the same way
_EXCEPTIONS_IN_BWRAP = "/program_exceptions.py"
_SETS = str(Path(__file__).with_name("program_sets.py").resolve())  # the same way
_ENCODE = str(Path(__file__).with_name("plain_encode.py").resolve())
_PENDING = str(Path(__file__).with_name("pending.py").resolve())
_VERSIONS = str(Path(__file__).with_name("dict_versions.py").resolve())  # read by replay_env.py, through
_MODULE_WATCH = str(Path(__file__).with_name("module_watch.py").resolve())  # module_watch.py
_FILES = (_REPLAY, _PLAIN_DATA, _LIVE, _REPLAY_ENV, _EXCEPTIONS, _SETS, _ENCODE, _PENDING, _VERSIONS, _MODULE_WATCH)
_LIMITS = Limits(timeout_s=60.0, memory_mb=2048, nproc=16, nofile=256)
_ENV = {**SAFE_ENV, "PYTHONHASHSEED": "0"}  # replay.py needs a fixed hash seed (set orders agree between passes)
_LOGGER = logging.getLogger("trl_ext.sandbox")
REFUSED_DETAIL = (
    "refused: the test executes data (eval/exec/pickle of a program's result), which could forge the verdict"
)
INTROSPECTION_DETAIL = (
    "refused: the test reads the code of a program function (__code__, __defaults__, inspect.signature); in the "
    "judge the judge's own function stands in for it"
)

# Runs in the confined interpreter: rlimits, the uid drop (bubblewrap as root), then replay.py's worker loop.
_BOOT = """
import json, os, resource, runpy, sys
path, uid, limits = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
for name, value in limits.items():
    resource.setrlimit(getattr(resource, name), value)
if uid >= 0 and os.geteuid() == 0:
    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
sys.argv = [path]
replay = runpy.run_path(path, run_name="trl_ext_replay_worker")
import ast
getframe, TEST_FILES = sys._getframe, ("tests.py", "prefix.py")
evaluate, compiled, prepare = replay["evaluate"], replay["_compiled"], replay["prepare"]
state = {"armed": False, "refused": False}
STAND_IN_CODE, AST_PARSE = replay["_STAND_IN_CODE"], ast.parse.__code__
# data becomes code through these: refused wherever the test is on the stack (timeit, runpy, doctest... included)
CODE = ("compile", "exec", "pickle.find_class", "marshal.load", "marshal.loads", "code.__new__")
# processes and signals: refused wherever the test is on the stack too (os.popen(f()) and
# subprocess.run(f(), shell=True) raise their event in os.py / subprocess.py, not in the test)
PROCESS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "os.kill")
# refused when the test itself calls them
REFUSED = CODE + PROCESS + ("socket.", "ctypes.", "os.putenv", "sys.setprofile", "sys.settrace", "object.__setattr__")
# standard modules that generate code from checked identifiers (namedtuple, dataclasses), called by name only
GENERATORS = tuple(os.path.join(os.path.dirname(os.__file__), name) for name in ("collections/__init__.py",
                                                                                  "dataclasses.py"))
class Refused(BaseException):
    pass
REBUILT = sys.modules["trl_ext_program_exceptions"].REBUILT  # the evaluation's rebuilt exceptions, by id()
unshadow = sys.modules["trl_ext_program_exceptions"].unshadow
def hook(event, args):
    # every id() raises builtins.id (tens per call of the program, in the judge's own code): out first, refused
    # only for a rebuilt exception (a new object per record: its id() is not the program's, red team R9-2)
    if event == "builtins.id":
        if args[0] in REBUILT and state["armed"] and not state.get("inside") and under_test(getframe(1), False):
            state["refused"], state["event"] = True, event
            raise Refused(event)
        return
    if not state["armed"] or state.get("inside"):
        return
    state["inside"] = True  # what the hook itself does raises events too
    try:
        check(event, args)
    finally:
        state["inside"] = False
def under_test(frame, whole_stack):
    # the event's Python caller is the test, or (whole_stack) the test is up the stack and neither the import
    # system nor a code generator of the standard library raised the event on its behalf
    if not whole_stack:
        return frame.f_code.co_filename in TEST_FILES
    if frame.f_code.co_filename in GENERATORS:
        return False
    while frame is not None:
        name = frame.f_code.co_filename
        if name in TEST_FILES:
            return True
        if name.startswith("<frozen importlib"):
            return False
        frame = frame.f_back
    return False
def check(event, args):
    if event == "object.__getattr__":  # a function's __code__/__defaults__/__kwdefaults__ (inspect.signature too)
        if getattr(args[0], "__code__", None) is STAND_IN_CODE and under_test(getframe(2), True):
            state["refused"], state["event"] = True, "object.__getattr__"
            raise Refused(event)
        return
    if not event.startswith(REFUSED) or not under_test(getframe(2), event.startswith(CODE + PROCESS)):
        return
    if event == "compile" and getframe(2).f_code is AST_PARSE:  # source -> syntax tree only (ast.literal_eval)
        return
    first = args[0] if args else None
    source = first.decode(errors="replace") if isinstance(first, bytes) else first
    bad = event not in ("compile", "exec")
    bad = bad or (event == "compile" and not isinstance(source, ast.AST) and source not in state["sources"])
    bad = bad or (event == "exec" and id(first) not in state["codes"])
    if bad:
        state["refused"], state["event"] = True, event
        raise Refused(event)
sys.addaudithook(hook)
def guarded(task):
    codes = compiled(task["test"], task.get("prefix"))  # cached: evaluate() runs these very objects
    state["codes"], state["sources"] = {id(code) for code in codes}, {task.get("test"), task.get("prefix")}
    state["armed"], state["refused"] = True, False
    try:
        answer = evaluate(task)
    finally:
        state["armed"] = False
    if state["refused"]:
        detail = INTROSPECTION if state["event"] == "object.__getattr__" else DETAIL + " (" + state["event"] + ")"
        return {"verdict": "unsupported", "detail": detail, "calls": []}
    return answer
replay["worker_main"].__globals__["evaluate"] = guarded
one_evaluation = replay["worker_main"].__globals__["evaluate"]
HELD_FDS = {int(fd) for fd in os.environ.get("TRL_EXT_HELD_FDS", "").split(",") if fd.isdigit()}
def in_a_fresh_process(task):
    # every evaluation in a fork of this process, which never ran a test: nothing one leaves reaches the next.
    # The test's code objects are compiled here first, the builtins it reads found and its real-types rule made
    # (pure functions of the dataset's test, prefix and names, never of a program's data): every fork finds them
    # ready (~3 + 1.5 + 0.7 ms an evaluation)
    try:
        prepare(task["test"], task.get("prefix"), task["names"])
    except BaseException:
        pass  # the evaluation itself reports it
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        # the worker's task and answer pipes closed: nothing this evaluation writes reaches another's verdict. The
        # Python installation's held roots stay (held_roots.py: its imports go through them)
        low = 3
        for fd in sorted({write_end, *HELD_FDS}):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        os.dup2(2, 0)
        try:
            answer = one_evaluation(task)
        except BaseException as exc:
            answer = {"verdict": "error", "detail": "evaluation failed: " + type(exc).__name__, "calls": []}
        data = memoryview(json.dumps(answer).encode())
        while data:
            data = data[os.write(write_end, data):]
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    if not chunks:
        return {"verdict": "error", "detail": "the evaluation process died", "calls": []}
    return json.loads(b"".join(chunks))
replay["worker_main"].__globals__["evaluate"] = in_a_fresh_process
for _module in PRELOAD:  # the standard modules a fork server preloads: imported once here, not by every evaluation
    try:
        __import__(_module)
    except ImportError:
        pass
import operator, _operator, unittest  # identity read in their own code, past the test's identity hook
def identity_guard(function):
    # a rebuilt exception is a new object per record (red team R9-2): "another object" is refused, "the same" holds
    def guarded(*args, **kwargs):
        start = 0 if function.__name__.startswith("is") else 1  # past a TestCase's self
        args = (*args[:start], *map(unshadow, args[start:start + 2]), *args[start + 2:])  # type(e) is ValueError
        first, second = args[start:start + 2]
        both = issubclass(type(first), BaseException) and issubclass(type(second), BaseException)  # else distinct
        if both and first is not second and (id(first) in REBUILT or id(second) in REBUILT):
            state["refused"], state["event"] = True, "identity of the program's exceptions"
            raise Refused(function.__name__)
        return function(*args, **kwargs)
    guarded.__name__, guarded.__qualname__, guarded.__doc__ = function.__name__, function.__qualname__, function.__doc__
    return guarded
for _name in ("assertIs", "assertIsNot"):
    setattr(unittest.TestCase, _name, identity_guard(getattr(unittest.TestCase, _name)))
for _module in (operator, _operator):  # operator.is_(a, b), is_not
    _module.is_, _module.is_not = identity_guard(_operator.is_), identity_guard(_operator.is_not)
import gc  # before the modules are remembered: an evaluation that finds sys.modules as remembered scans nothing
replay["replay_env"].watch_modules()  # once here, not in every evaluation's process (about 1 ms each)
gc.freeze()  # what is loaded now is never collected: a fork does not copy every page it sits on to walk it
replay["worker_main"]()
"""


def confinement() -> str:
    """The strongest local backend that works here: "bwrap", "landlock" or "none"."""
    for name in ("bwrap", "landlock"):
        try:
            get_backend(name)
        except SandboxUnavailable:
            continue
        return name
    return "none"


def _rlimits() -> str:
    """The worker's rlimits: no CPU limit (the pool's deadline kills it); RLIMIT_NPROC counts every process of
    the uid, so only where the worker has a uid of its own (root)."""
    skip = {"RLIMIT_CPU"} | ({"RLIMIT_NPROC"} if os.geteuid() != 0 else set())
    return json.dumps({k: v for k, v in _LIMITS.rlimits().items() if k not in skip})


def _boot_args(path: str, uid: int) -> list[str]:
    boot = (
        _BOOT.replace("DETAIL", repr(REFUSED_DETAIL))
        .replace("INTROSPECTION", repr(INTROSPECTION_DETAIL))
        .replace("PRELOAD", repr(forkserver.PRELOAD))
    )
    return [sandbox_interpreter(), "-s", "-c", boot, path, str(uid), _rlimits()]


def _popen(argv: list[str], env: dict, pass_fds=(), cwd: str | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        pass_fds=pass_fds,
        start_new_session=True,
        bufsize=0,
    )


def _spawn_bwrap():
    backend = get_backend("bwrap")
    uid = UIDS.acquire() if os.geteuid() == 0 else -1
    argv = backend.argv(_boot_args(_REPLAY_IN_BWRAP, uid), _LIMITS)
    filter_fd = memfd_with(seccomp.bpf(allow_memfd=seccomp.memfd_allowed()), "eval-seccomp")
    info_r, info_w = os.pipe()  # the namespace init's pid: to reap where orphans come here
    at = argv.index("--remount-ro")
    argv[at:at] = ["--ro-bind", _REPLAY, _REPLAY_IN_BWRAP, "--ro-bind", _PLAIN_DATA, _PLAIN_DATA_IN_BWRAP]
    argv[at:at] = ["--ro-bind", _LIVE, _LIVE_IN_BWRAP]
    argv[at:at] = ["--ro-bind", _REPLAY_ENV, _REPLAY_ENV_IN_BWRAP, "--ro-bind", _EXCEPTIONS, _EXCEPTIONS_IN_BWRAP]
    argv[at:at] = ["--ro-bind", _SETS, "/program_sets.py", "--ro-bind", _ENCODE, "/plain_encode.py"]
    argv[at:at] = ["--ro-bind", _PENDING, "/pending.py", "--ro-bind", _VERSIONS, "/dict_versions.py"]
    argv[at:at] = ["--ro-bind", _MODULE_WATCH, "/module_watch.py"]
    argv[at:at] = ["--seccomp", str(filter_fd), "--info-fd", str(info_w)]
    argv[at:at] = ["--setenv", "PYTHONHASHSEED", "0"]
    try:
        proc = _popen(argv, _ENV, pass_fds=(filter_fd, info_w))
    finally:
        os.close(filter_fd)
        os.close(info_w)
    return proc, lambda: _finish(proc, uid, None, info_r)


def _spawn_landlock():
    as_root = os.geteuid() == 0
    uid = UIDS.acquire() if as_root else -1
    scratch = landlock.make_scratch(uid if as_root else None)
    filter_fd = memfd_with(seccomp.bpf(allow_memfd=seccomp.memfd_allowed()), "eval-seccomp")
    pid_r, pid_w = os.pipe()
    roots = python_roots()
    held = HeldRoots([*landlock.read_only_paths(roots), *_FILES], roots)
    config = {
        "pid_fd": pid_w,
        "uid": uid if as_root else None,
        "read_only": [*landlock.read_only_paths(roots), *_FILES],
        "scratch": scratch,
        "min_abi": landlock.min_abi(),
        "seccomp_fd": filter_fd,
    }
    argv = landlock.launcher_argv(config, _boot_args(_REPLAY, -1), held)
    env = {**landlock.env(scratch), "PYTHONHASHSEED": "0"}
    try:
        proc = _popen(argv, env, pass_fds=(filter_fd, pid_w, *held.descriptors), cwd=scratch)
    finally:
        os.close(filter_fd)
        os.close(pid_w)
        held.close()
    return proc, lambda: _finish(proc, uid, scratch, pid_r, info=False)


def _spawn_unconfined():
    # no uid drop: the interpreter may sit where other uids cannot reach it, and nothing confines this worker
    proc = _popen(_boot_args(_REPLAY, -1), _ENV, cwd="/")
    return proc, lambda: _finish(proc, -1, None)


def _finish(proc: subprocess.Popen, uid: int, scratch: str | None, fd: int | None = None, info: bool = True) -> None:
    """After the worker was killed: every process of its session (reaped where orphans come here), its scratch
    directory, its uid. ``fd``: bubblewrap's info pipe (``info``) or the landlock launcher's pid pipe."""
    orphans = []
    if fd is not None:
        if info:
            with contextlib.suppress(OSError, ValueError):
                os.set_blocking(fd, False)
                orphans.append(json.loads(os.read(fd, 4096))["child-pid"])
        os.close(fd)
    kill_session(proc.pid)
    reap_run(proc.pid, orphans)
    remove_scratch(scratch)
    if uid >= 0:
        UIDS.release(uid)


_SPAWNERS = {"bwrap": _spawn_bwrap, "landlock": _spawn_landlock, "none": _spawn_unconfined}


def evaluation_pool(size: int) -> WorkerPool:
    """A pool of ``size`` confined evaluation workers, each serving one evaluation (see the module docstring)."""
    how = confinement()
    if how == "none":
        _LOGGER.warning(
            "trl_ext sandbox: neither bubblewrap nor landlock can run here; assert tests are evaluated unconfined, "
            "and a test that executes data (eval/exec/pickle of a program's result) is refused and fails "
            "(status unsupported_test)"
        )
    else:
        _LOGGER.info("trl_ext sandbox: evaluation workers confined by %s", how)
    return WorkerPool([sys.executable, _REPLAY], size=size, startup_timeout_s=60, spawn=_SPAWNERS[how])
