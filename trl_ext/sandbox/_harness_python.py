"""What a program gets of ``python solution.py`` in the sandbox (red team round 12), the first part of the harness's
source (``base.HARNESS_SOURCE``: this file, then ``_harness.py``): the builtins ``site`` adds, its own stack depth and
its source as a file. Self-contained, C modules and ``_sitebuiltins`` only, as ``_harness.py``."""

import _operator
import _signal
import _sitebuiltins  # Python, but importing sys only (``site`` would import os and set paths: ~0.9 ms a run)
import _weakref
import atexit
import builtins
import gc
import posix as os  # os itself is a Python module with imports of its own
import sys

_issubclass, _bool, _getattr, _type, _str = issubclass, bool, getattr, type, str  # as found (no program yet)
# What the ending uses, as found: the program may replace or clear any module's names before it (red team round 16)
_exit, _kill, _getpid, _signal_to, _collect = os._exit, os.kill, os.getpid, _signal.signal, gc.collect
_run_exitfuncs, _gc_callbacks, _weak, _module_type = atexit._run_exitfuncs, gc.callbacks, _weakref.ref, type(sys)
_SYS_MODULES, _SYS_DICT, _BUILTINS_DICT = sys.modules, vars(sys), vars(builtins)
_BUILTINS_AT_START = dict(_BUILTINS_DICT)  # python's copy, taken before ``site``'s names (restored at its ending)
_MODULES_BEFORE = []  # (module, its dict's length) when the program started (``_note_modules``)
_module_dict = _module_type.__dict__["__dict__"].__get__  # a module's own dict, as C reads it (no property of it)


def _site_builtins():
    """The names ``site`` adds to builtins, as ``python solution.py`` has them: every sandboxed interpreter starts
    with -S, and a contest program ending with ``exit()`` or ``quit()`` must not raise NameError after printing its
    answer (red team round 12). Made with ``site``'s own classes, as ``site.setquit``/``sethelper``/``setcopyright``
    make them; nothing is changed where ``site`` ran (``Limits(site_packages=True)``)."""
    if hasattr(builtins, "exit"):
        return
    eof = "Ctrl-D (i.e. EOF)"
    builtins.quit, builtins.exit = _sitebuiltins.Quitter("quit", eof), _sitebuiltins.Quitter("exit", eof)
    builtins.help = _sitebuiltins._Helper()
    builtins.copyright = _sitebuiltins._Printer("copyright", sys.copyright)
    builtins.credits = _sitebuiltins._Printer("credits", "See https://www.python.org/about/credits/")
    builtins.license = _sitebuiltins._Printer("license", "See https://www.python.org/psf/license/")


def _depth():
    """How many frames the caller's stack holds, the caller's own included."""
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def _program_file(code):
    """Write the program's source as ``solution.py`` in the run's working directory (its scratch), as ``python
    solution.py`` has it: ``__file__``, tracebacks and ``inspect`` read it (red team round 12: a program locating
    its own directory scored 0). Its path, or None where it cannot be written or a file of that name is there
    (one of the run's ``files``)."""
    try:
        path = os.getcwd() + "/solution.py"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except BaseException:  # noqa: B036 - best effort: no scratch to write in
        return None
    try:
        data = str.encode(code, "utf-8", "surrogatepass")
        while data:
            data = data[os.write(fd, data) :]
    except BaseException:  # noqa: B036
        path = None
    os.close(fd)
    return path


def _main_module(path):
    """The program's module as ``python solution.py`` makes it, now ``sys.modules["__main__"]`` (unittest, doctest,
    pickle and ``import __main__`` find it): the builtins module as ``__builtins__``, ``__annotations__`` and
    ``__cached__``, and where its source is a file (``path``, ``_program_file``) ``__file__`` and a source loader
    (red team rounds 12 and 13), and its directory first on ``sys.path`` (round 14). Every mode makes the program's
    module here; the SandboxFusion files wrapper copies these names from the module this made for it (``run_code``)."""
    module = type(sys)("__main__")
    module.__builtins__, module.__annotations__, module.__cached__ = builtins, {}, None
    if path is not None:
        module.__file__ = path
        module.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
        sys.path.insert(0, path.rpartition("/")[0])  # the script's directory first (red team round 14, R14J-10)
    sys.modules["__main__"] = module
    return module


_set_limit, _get_limit = sys.setrecursionlimit, sys.getrecursionlimit  # the genuine ones
_FRAMES_UNDER = [0]  # the harness's frames under the program's: the interpreter's limit less these is the program's


# ``sys.setrecursionlimit``/``getrecursionlimit`` as the program calls them: its limit counts the program's frames,
# as under ``python solution.py``, not the harness's under them (red team round 14, R14J-9: a program's own 1000
# left it frames short, and under 1000 in an assert test every call failed). Made in a namespace of their own: the
# program reaches a function's globals, which must hold nothing of the harness (the frames count there is a copy).
_PROGRAM_SYS_SOURCE = """
def setrecursionlimit(limit, /):
    limit = index(limit)
    if limit < 1:
        raise ValueError("recursion limit must be greater or equal than 1")
    set_limit(limit + under[0])
def getrecursionlimit():
    return get_limit() - under[0]
"""
_PROGRAM_SYS = {"__builtins__": {"ValueError": ValueError}, "index": _operator.index, "under": [0]}
_PROGRAM_SYS.update(set_limit=_set_limit, get_limit=_get_limit)
exec(compile(_PROGRAM_SYS_SOURCE, "<sys>", "exec"), _PROGRAM_SYS)


def _program_getrecursionlimit():
    """The program's recursion limit (the harness's count of its own frames, which the program cannot change)."""
    return _get_limit() - _FRAMES_UNDER[0]


def _frames_under_program(frames):
    """Put ``frames`` harness frames under the program's from here on (its first frame's depth less one): the
    interpreter's limit moves with them, the program's stays; the program's ``sys`` reads and sets its own."""
    limit = _program_getrecursionlimit()
    _FRAMES_UNDER[0] = _PROGRAM_SYS["under"][0] = frames
    _set_limit(limit + frames)
    sys.setrecursionlimit, sys.getrecursionlimit = _PROGRAM_SYS["setrecursionlimit"], _PROGRAM_SYS["getrecursionlimit"]


def _note_modules():
    """Note the modules loaded, and how many names each has, just before the program's module is made: its ending
    clears the modules the program loaded or added names to, as python's clears every module
    (``_finalize_modules``)."""
    _MODULES_BEFORE[:] = [
        (module, len(vars(module))) for module in _SYS_MODULES.values() if _type(module) is _module_type
    ]


def _python_exit(status, uncaught, exit_code):
    """End the program's process as ``python solution.py`` ends (CPython 3.11's PyErr_Print, Py_FinalizeEx and
    Py_RunMain); never returns (red team rounds 13 to 16: output and statuses lost where a forked process ended
    itself). ``uncaught``: [the exc_info of an exception the program did not catch (``status`` 1)] or []: it goes to
    ``sys.excepthook``, and a SystemExit out of the hook gives the status (``exit_code`` reads it). Then threads
    not daemon are waited for, atexit functions run, sys.stdout and sys.stderr are flushed, the modules finalised
    (``_finalize_modules``) and the streams flushed again: 120 if a flush failed. An uncaught KeyboardInterrupt ends
    the process by SIGINT. Total: what the program's objects raise here, SystemExit included, is python's to print
    and goes no further (red team round 16, R16J-2: a crash exited 0); the harness reads no attribute of them."""
    try:
        status = _python_ending(status, uncaught, exit_code)
    except BaseException:  # noqa: B036 - never reached by what the program raises (each step is quiet)
        status = 1
    _exit(status)


def _python_ending(status, uncaught, exit_code):
    info = uncaught.pop() if uncaught else None  # taken: the caller holds no traceback, nor its frames' globals
    interrupted = info is not None and _issubclass(_type(info[1]), KeyboardInterrupt)
    if info is not None:
        try:
            sys.excepthook(*info)
        except SystemExit as exc:  # python exits at once with the hook's status (no SIGINT)
            status, interrupted = exit_code(exc), False
        except BaseException:  # noqa: B036 - python prints both
            _quiet(_hook_failed, info)
    info = None
    _quiet(lambda: _SYS_MODULES["threading"]._shutdown() if "threading" in _SYS_MODULES else None)
    _quiet(_run_exitfuncs)
    flushed = _flush_standard_streams()
    _quiet(_finalize_modules)
    flushed = _flush_standard_streams() and flushed
    if interrupted:  # python's exit_sigint: death by SIGINT, else (blocked) 130
        _quiet(_signal_to, _signal.SIGINT, _signal.SIG_DFL)
        _quiet(_kill, _getpid(), _signal.SIGINT)
        return 130
    return status if flushed else 120


def _quiet(action, *args):
    try:  # noqa: SIM105 - contextlib is a Python module: the harness imports C modules only
        action(*args)
    except BaseException:  # noqa: B036 - the program may have broken what this calls: its output, its problem
        pass


def _hook_failed(uncaught):
    sys.stderr.write("Error in sys.excepthook:\n")
    sys.__excepthook__(*sys.exc_info())
    sys.stderr.write("\nOriginal exception was:\n")
    sys.__excepthook__(*uncaught)


def _flush_standard_streams():
    """python's ``flush_std_files``: sys.stdout, then sys.stderr, each unless None or closed (a ``closed`` that is
    missing or fails reads as open); False if a flush failed."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = _SYS_DICT.get(name)
        try:
            closed = _bool(stream.closed)
        except BaseException:  # noqa: B036
            closed = False
        try:
            if stream is not None and not closed:
                stream.flush()
        except BaseException:  # noqa: B036
            flushed = False
    return flushed


def _finalize_modules():
    """python's ``finalize_modules``: sys's special names set to None and its standard streams restored from
    ``sys.__stdin__``...; every entry of ``sys.modules`` dropped (a value that is no module too), builtins restored
    to python's start-up copy, garbage collected without ``gc.callbacks`` (as ``_PyGC_CollectNoFail``), then each
    module still alive cleared, the last loaded first, then sys's names: red team rounds 15 (R15-1: collected
    before cleared) and 16 (R16J-1, 3: other modules, builtins, callbacks). A module loaded before the program with
    as many names as then (``_note_modules``) holds none of the program's and is left as it is: clearing the
    harness's own would cost a run milliseconds of copied pages (a documented limit: a program object kept inside
    such a module's existing value, not a name of its own, is not finalised there)."""
    special = ("path", "argv", "ps1", "ps2", "last_type", "last_value", "last_traceback", "path_hooks", "meta_path")
    for name in (*special, "path_importer_cache", "__interactivehook__"):
        _quiet(_SYS_DICT.__setitem__, name, None)
    for name in ("stdin", "stdout", "stderr"):
        _quiet(_SYS_DICT.__setitem__, name, _SYS_DICT.get("__" + name + "__"))
    before = {id(module): size for module, size in _MODULES_BEFORE}
    loaded = []  # in load order: a module the program loaded, weakly; one loaded before it that it added names to
    for name, module in list(_SYS_MODULES.items()):  # (its dict may sit in a cycle frozen before the program: held)
        if _issubclass(_type(module), _module_type) and before.get(id(module)) != len(_module_dict(module)):
            loaded.append(module if id(module) in before else _weak(module))
        _quiet(_SYS_MODULES.__setitem__, name, None)
        module = None
    _SYS_MODULES.clear()
    _BUILTINS_DICT.clear()
    _BUILTINS_DICT.update(_BUILTINS_AT_START)
    _gc_callbacks.clear()
    _collect()  # first, as python: what a cycle holds with a module's globals is finalised with them intact
    while loaded:
        module = loaded.pop()
        module = module() if _type(module) is _weak else module
        names = _module_dict(module) if module is not None and module is not sys and module is not builtins else {}
        module = None
        _clear_names(names)
        names = None
    if before.get(id(sys)) != len(_SYS_DICT):
        _clear_names(_SYS_DICT)
    _collect()


def _clear_names(names):
    """``_PyModule_ClearDict``: its str names set to None, those with one leading underscore first, then the others
    but ``__builtins__``."""
    for first in (True, False):
        for name in list(names):
            if not _issubclass(_type(name), _str):
                continue
            single = _str.startswith(name, "_") and not _str.startswith(name, "__")
            if (single if first else name != "__builtins__") and names.get(name) is not None:
                _quiet(names.__setitem__, name, None)


_site_builtins()
