"""What a program gets of ``python solution.py`` in the sandbox (red team round 12), the first part of the harness's
source (``base.HARNESS_SOURCE``: this file, then ``_harness.py``): the builtins ``site`` adds, its own stack depth and
its source as a file. Self-contained, C modules and ``_sitebuiltins`` only, as ``_harness.py``."""

import _sitebuiltins  # Python, but importing sys only (``site`` would import os and set paths: ~0.9 ms a run)
import builtins
import posix as os  # os itself is a Python module with imports of its own
import sys


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
    (red team rounds 12 and 13). Every mode makes the program's module here; the SandboxFusion files wrapper copies
    these names from the module this made for it (``run_code.py``)."""
    module = type(sys)("__main__")
    module.__builtins__, module.__annotations__, module.__cached__ = builtins, {}, None
    if path is not None:
        module.__file__ = path
        module.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    sys.modules["__main__"] = module
    return module


_site_builtins()
