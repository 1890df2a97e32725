"""Class 1, routes to a frame with no audited event (docs/sandbox.md, "No frame reaches the harness"): a Python
signal handler is called with the interrupted frame, and ``gc.DEBUG_SAVEALL`` keeps the program's own finished
frames (held by an exception it kept) in ``gc.garbage``; either frame's ``f_back`` chain leads to the harness's
globals. In the judged modes the harness refuses installing a signal handler (a second seccomp filter:
rt_sigaction with a new action gets EPERM), refuses ``DEBUG_SAVEALL`` and a fresh ``gc``/``_imp`` module, and
refuses a subinterpreter (whose ctypes no hook of ours governs). Each route is first shown to reach a
harness-like namespace in plain CPython (the positive control), then to find nothing, or be refused, on every
backend and judged mode; forgers that rewrite the harness's check through a route score 0; right programs pass."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_frame_hook import LEN_IN_CALL
from trl_ext.sandbox import Limits, run_tests

NAMES = ("_describe", "_module_changed", "_calls_child", "_case_child", "_deny_frames", "_child")
SEARCH = f"""import _signal as signal, gc, sys  # C modules: the rlimit backend's uid may read no other
NAMES = {NAMES!r}
def _names_from(frame):
    found = set()
    while frame is not None:
        if frame.f_globals is not globals():
            found.update(name for name in NAMES if name in frame.f_globals)
        frame = frame.f_back
    return found
def _held_error():
    try:
        raise KeyError
    except KeyError as error:
        return error  # its traceback holds this function's frame, whose f_back is set once it returns
def _garbage_names(collector):
    held = [_held_error()]
    held.append(held)  # a cycle: the frame becomes cyclic garbage with it
    del held
    try:
        collector.set_debug(gc.DEBUG_SAVEALL)
    except ValueError:
        pass
    gc.collect()
    collector.set_debug(0)
    found = set()
    for obj in gc.garbage:
        if type(obj).__name__ == "frame":
            found |= _names_from(obj)
        elif type(obj).__name__ == "function" and obj.__globals__ is not globals():
            found.update(name for name in NAMES if name in obj.__globals__)
    del gc.garbage[:]
    return found
def _fresh_gcs():  # gc modules with a set_debug of their own: the built-in maker's, libpython's PyInit_gc
    import _imp, posix
    spec, fresh = sys.modules["_frozen_importlib"].ModuleSpec, []
    try:
        fresh.append(_imp.create_builtin(spec("gc", None, origin="built-in")))
    except ValueError:
        pass
    lib = sys.base_prefix + "/lib/"
    try:
        shared = [lib + name for name in posix.listdir(lib) if name.startswith("libpython") and ".so" in name]
    except OSError:  # the rlimit backend as root: its uid cannot read the installation
        shared = []
    for origin in shared[:1]:
        for name in ("gc", "fresh.gc\\x00"):  # C reads the name up to a NUL: PyInit_gc (R10bJ-6)
            try:
                fresh.append(_imp.create_dynamic(spec(name, None, origin=origin)))
            except (ValueError, ImportError):
                pass
    return fresh
def _native():  # a shared object the program wrote: a copy of one of the interpreter's own
    import _imp, posix
    try:
        import _json
        with open(_json.__file__, "rb") as source, open("mine.so", "wb") as copy:
            copy.write(source.read())
    except (ImportError, AttributeError, OSError):  # rlimit as root: its uid cannot read the installation
        return set()
    spec = sys.modules["_frozen_importlib"].ModuleSpec("_json", None, origin=posix.getcwd() + "/mine.so")
    try:
        _imp.create_dynamic(spec)
    except (ValueError, ImportError):
        return set()
    return {{"native"}}
def _handler_names():
    found = set()
    try:
        signal.signal(signal.SIGUSR1, lambda signum, frame: found.update(_names_from(frame)))
    except OSError as refused:
        return {{"refused " + str(refused.errno)}}
    signal.raise_signal(signal.SIGUSR1)
    return found
def _subinterpreter():
    try:
        import _xxsubinterpreters
    except ImportError:  # the rlimit backend as root: its uid cannot read the interpreter's extension modules
        return set()
    try:
        _xxsubinterpreters.destroy(_xxsubinterpreters.create())
    except (ValueError, RuntimeError):
        return set()
    return {{"subinterpreter"}}
class _Collected:
    def __del__(self):
        AT_DEL.update(_garbage_names(gc))
AT_DEL, AT_IMPORT = set(), _garbage_names(gc)
def reached():
    dying = _Collected()
    dying.cycle = dying
    del dying
    found = _garbage_names(gc) | _handler_names() | _subinterpreter() | _native()
    for fresh in _fresh_gcs():
        found |= _garbage_names(fresh) | {{"fresh gc"}}
    return sorted(found | AT_IMPORT | AT_DEL)
"""
HARNESS = str(Path(__file__).parents[2] / "trl_ext" / "sandbox" / "_harness.py")
REFUSED = [f"refused {errno.EPERM}"]  # what every route gives in a judged run: signal.signal's EPERM, nothing else


def test_each_route_reaches_a_harness_namespace_in_plain_cpython(tmp_path):
    """The positive control: called from a namespace that holds the harness's names (as the harness's frames'
    globals do), the program's search finds them through each route."""
    fake = "_describe = _module_changed = None\ndef _call(fn):\n    return fn()\nprogram = {}\n"
    script = fake + f"exec({SEARCH!r}, program)\nprint(__import__('json').dumps(_call(program['reached'])))\n"
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["_describe", "_module_changed", "fresh gc", "native", "subinterpreter"]


# remote: sandbox-serve given the payload itself ("1"), or the SandboxFusion program that execs the harness
LAUNCHES = [("bwrap", "0"), ("bwrap", "1"), ("landlock", "0"), ("landlock", "1"), ("rlimit", "0"), ("remote", "1")]
LAUNCHES += [("remote", "bootstrap")]


@pytest.fixture(params=LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def launch(request, monkeypatch):
    from trl_ext.sandbox import forkserver
    from trl_ext.sandbox.backends import BACKEND_ENV, URL_ENV
    from trl_ext.sandbox.remote import PROTOCOL_ENV

    backend, fork = request.param
    if backend == "remote":
        monkeypatch.setenv(URL_ENV, request.getfixturevalue("sandbox_server"))
        monkeypatch.setenv(PROTOCOL_ENV, "bootstrap" if fork == "bootstrap" else "auto")
    monkeypatch.setenv(BACKEND_ENV, backend)
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "1" if fork == "bootstrap" else fork)
    return request.param


def test_no_route_finds_the_harness_in_calls_and_stdio_runs(launch):
    limits = Limits(timeout_s=10.0)
    call = {"kind": "call", "fn_name": "reached", "cases": [{"args": [], "expected": REFUSED}]}
    calls = run_tests(SEARCH, call, limits=limits)
    assert calls.all_passed, calls
    stdio = {"kind": "stdio", "cases": [{"input": "", "output": str(REFUSED)}]}
    cases = run_tests(SEARCH + "print(reached())\n", stdio, limits=limits)
    assert cases.all_passed, cases
    assertion = run_tests(SEARCH, {"kind": "assert", "code": f"assert reached() == {REFUSED!r}"}, limits=limits)
    assert assertion.all_passed, assertion


# Forgers: through the route, the module replaces the harness's check that a call changed a builtin name of the
# module (R9b-3), then its call rebinds ``len``: the test's later ``len(...)`` would be judged on the load-time facts.
# The frame's attributes are read by a ``match`` class pattern, which the source check does not see (R9b-1).
DISARM = """def _disarm(frame):
    while frame is not None:
        match frame:
            case object(f_globals=space, f_back=frame):
                if '_module_changed' in space:
                    space['_module_changed'] = lambda namespace: False
"""
FORGE_BY_SIGNAL = (
    DISARM
    + """import signal
try:
    signal.signal(signal.SIGUSR1, lambda signum, frame: _disarm(frame))
    signal.raise_signal(signal.SIGUSR1)
except OSError:
    pass
"""
)
FORGE_BY_GARBAGE = (
    DISARM
    + """from timeit import gc  # ``import gc`` would make the source unreadable: the test refused
def _held_error():
    try:
        raise KeyError
    except KeyError as error:
        return error
held = [_held_error()]
held.append(held)
del held
try:
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    gc.set_debug(0)
except ValueError:
    pass
for _frame in [obj for obj in gc.garbage if type(obj).__name__ == 'frame']:
    _disarm(_frame)
"""
)
LEN_TEST = "assert f('abc') == 'cba'\nassert len(f('abc')) == 3"
RIGHT_ASYNC = (
    "import asyncio\nasync def _double(x):\n    return 2 * x\ndef double(x):\n    return asyncio.run(_double(x))\n"
)
RIGHT_WITH_ALARM = "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\ndef double(x):\n    return 2 * x\n"
HANDLERS = "import signal\ndef handlers():\n    return [int(s) for s in signal.valid_signals() if callable(signal.getsignal(s))]\n"


@pytest.mark.parametrize("launch", [("bwrap", "0"), ("landlock", "1")], indirect=True, ids=["bwrap-0", "landlock-1"])
def test_forgers_score_zero_and_programs_without_handlers_pass(launch, monkeypatch):
    cases = [
        (FORGE_BY_SIGNAL + LEN_IN_CALL, LEN_TEST, 0.0),
        (FORGE_BY_GARBAGE + LEN_IN_CALL, LEN_TEST, 0.0),
        # asyncio.run leaves a SIGINT at SIG_DFL alone; its loop needs socketpair, allowed only with a memory
        # cgroup (root here; class 6, test_kernel_objects.py)
        (RIGHT_ASYNC, "assert double(2) == 4", float(os.geteuid() == 0)),
        (RIGHT_WITH_ALARM, "assert double(2) == 4", 0.0),  # fails closed: signal.signal raises PermissionError
        (HANDLERS, "assert handlers() == []", 1.0),  # no handler of the harness's, Python or C, when it starts
    ]
    scores, outcomes = grade_asserts(launch, *map(list, zip(*[case[:2] for case in cases])), monkeypatch)
    assert scores == [case[2] for case in cases], list(zip([case[1] for case in cases], scores))
    assert outcomes["code_tests/infra_error"] == 0.0


FILTERED = """import asyncio, faulthandler, json, signal, subprocess, sys
ns = {"__name__": "_harness"}
exec(open(sys.argv[1]).read(), ns)
ns["_no_signal_handlers"]()
got = {"sigint": int(signal.getsignal(signal.SIGINT))}
try:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
except OSError as e:
    got["signal"] = e.errno
try:
    faulthandler.enable()
except RuntimeError as e:
    got["faulthandler"] = e.args[0]
got["asyncio"] = asyncio.run(asyncio.sleep(0, result=5))
got["child"] = subprocess.run(["sh", "-c", "echo hi | cat"], capture_output=True, text=True).stdout
print(json.dumps(got))
"""


def test_the_filter_refuses_new_handlers_and_leaves_the_rest():
    """The stacked filter alone, in a plain interpreter: every new disposition is refused (EPERM), SIGINT is back at
    SIG_DFL, and asyncio, a child process and a pipe in a shell still work."""
    done = subprocess.run([sys.executable, "-I", "-c", FILTERED, HARNESS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "sigint": 0, "signal": errno.EPERM, "faulthandler": errno.EPERM, "asyncio": 5, "child": "hi\n"
    }  # fmt: skip


def test_the_filter_numbers_are_libseccomps():
    import pyseccomp as sc

    harness = {"__name__": "_harness"}
    exec(Path(HARNESS).read_text(), harness)
    x86, arm = (sc.Arch.X86_64, sc.Arch.X32), (sc.Arch.AARCH64,)
    for machine, abis in (("x86_64", x86), ("aarch64", arm)):
        numbers = tuple(sc.resolve_syscall(abi, "rt_sigaction") for abi in abis)
        assert harness["_SIGACTION"][machine] == (int(abis[0]), numbers)


def test_only_files_of_the_installation_load_as_extension_modules():
    harness = {"__name__": "_harness"}
    exec(Path(HARNESS).read_text(), harness)
    installed, prefix = harness["_installed"], sys.base_prefix.rstrip("/")
    own = prefix + "/lib/python3/lib-dynload/_json.so"
    assert installed(own)
    for outside in (
        "/tmp/scratch/mine.so",
        "mine.so",  # relative: the working directory is the run's scratch
        prefix + "/../../tmp/mine.so",
        prefix + "/./lib/../../tmp/mine.so",
        prefix + "//tmp/mine.so",
        prefix + "-other/lib/mine.so",  # a sibling directory that shares the prefix's spelling
        prefix,
    ):
        assert not installed(outside), outside


STAND_INS = """from importlib._bootstrap import _imp
from timeit import gc  # ``import gc`` would make the source unreadable: the test refused
def stand_ins():
    made = [gc.set_debug, _imp.create_builtin, _imp.create_dynamic]
    spaces = [function.__globals__ for function in made]
    seen = [sorted(space) for space in spaces], [space["__builtins__"] for space in spaces]
    marks = [space.get("mark") for space in spaces]
    for space in spaces:
        space["mark"] = 1  # this run's own namespace: the next run makes its stand-ins over a fresh one
    return seen, marks, spaces[0] is spaces[1] is spaces[2], made[0].__code__ is not made[1].__code__
"""
STAND_INS_TEST = (
    "assert stand_ins() == (([['__builtins__', 'audit']] * 3, [{}] * 3), [None] * 3, True, True)\n"
    "assert stand_ins()[1] == [1, 1, 1]"
)


@pytest.mark.parametrize("launch", [("bwrap", "1"), ("landlock", "1")], indirect=True, ids=["bwrap-1", "landlock-1"])
def test_collector_stand_ins_are_made_in_every_run(launch, monkeypatch):
    """The stand-ins for ``gc.set_debug`` and ``_imp``'s makers are made in each run over a namespace of their own
    (holding ``audit`` and no builtins) from code the harness compiled once: what one run writes there, the next
    run's do not hold, on the fork server whose children share that code."""
    scores, outcomes = grade_asserts(launch, [STAND_INS] * 2, [STAND_INS_TEST] * 2, monkeypatch)
    assert scores == [1.0, 1.0], outcomes
    assert outcomes["code_tests/infra_error"] == 0.0
