"""What a program gets of ``python solution.py`` in the sandbox (red team round 12), the first part of the harness's
source (``base.HARNESS_SOURCE``: this file, then ``_harness.py``): the builtins ``site`` adds, its own stack depth and
its source as a file. Self-contained, C modules and ``_sitebuiltins`` only, as ``_harness.py``."""

import _operator
import _sitebuiltins  # Python, but importing sys only (``site`` would import os and set paths: ~0.9 ms a run)
import builtins
import posix as os  # os itself is a Python module with imports of its own
import sys

_HELD_MODULES = []  # the modules loaded before the program, held to the interpreter's end (``_hold_modules``)


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


_SYS_NAMES, _BaseException = vars(sys), BaseException  # as found: sys's names read from its dict, as python does


def _run_main(code, path, namespace):
    """Run the program's code in ``namespace`` as ``python solution.py`` runs its file (CPython 3.11's
    ``_PyRun_SimpleFileObject``): once its code ended, sys.stderr and sys.stdout are flushed (what a flush raises is
    dropped) and ``__file__`` and ``__cached__`` deleted; what the code raised goes on, to the harness's top, where
    CPython prints it and ends the process as python's own ending does (red team round 16b, R16B-5, 8: an
    ``atexit.register(os._exit, 0)`` after a print lost the output). After the program, only names bound before it
    are read, and the flush comes outside the ``except`` (round 16c, R16C-4: a rebound ``builtins.getattr`` ran
    here; R16C-2: ``sys.exc_info()`` was set during the flush). Python deletes the two names after the excepthook,
    here before."""
    error = None
    try:
        exec(compile(code, path or "solution.py", "exec"), namespace)
    except _BaseException as raised:  # noqa: B036 - raised again below, once python's steps after a script are done
        error = raised
    _script_ended(namespace)
    namespace = None  # the traceback's frames hold no globals of the program (python's hold its own frame's)
    if error is not None:
        raise error


def _script_ended(namespace):
    for name in ("stderr", "stdout"):
        try:  # noqa: SIM105 - contextlib is a Python module: the harness imports C modules only
            _SYS_NAMES.get(name).flush()
        except _BaseException:  # noqa: B036 - python's flush_io drops what a flush raises
            pass
    for name in ("__file__", "__cached__"):
        namespace.pop(name, None)


def _hold_modules():
    """Hold every module loaded before the program until the interpreter's end, where python's ``finalize_modules``
    clears each module still alive: a fork server and the stdio harness froze their objects (``gc.freeze``), so a
    module dropped from ``sys.modules`` would leave its dict in a frozen cycle no collection frees, and what the
    program kept there (a writer on descriptor 1 as ``io.out``) would never be finalised (red team round 16,
    R16J-3)."""
    _HELD_MODULES[:] = [module for module in sys.modules.values() if type(module) is type(sys)]


_site_builtins()
