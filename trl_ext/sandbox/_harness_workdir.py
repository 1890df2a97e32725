"""The working directory between the cases of a stdio test, in the sandbox (``_harness_runtime._stdio_mode``): each
case after the first starts in it emptied of what the cases before left. Compiled with ``_harness_values.py`` and
``_harness_runtime.py`` as one module (``base.harness_runtime_source``); same rules: stdlib C modules only, no
trl_ext import.
"""

import _stat
import posix as os  # os itself is a Python module with imports of its own


def _empty_directory():
    """Remove everything in the working directory (a case's files, directories and the program's source), depth
    first without recursion, making each directory the harness's to list and empty first (the program may have
    taken its permissions away). Each step names one entry of the directory it is in, so a tree D deep costs O(D),
    not the O(D**2) of full paths (red team round 15, R15-3). Best effort: what cannot go stays (the scratch goes
    with the run); the working directory is the same one after."""
    try:  # noqa: SIM105 - contextlib would cost start-up time
        os.chmod(".", 0o700)
    except OSError:  # refused where the seccomp filter refuses chmod
        pass
    top = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        _empty_from_here(os.fstat(top).st_ino)
    except OSError:
        pass
    finally:
        os.fchdir(top)
        os.close(top)


def _empty_from_here(top_inode):
    levels = [("", top_inode, os.listdir("."))]  # (its name in its parent, its inode, its entries left)
    while levels:
        name, _inode, entries = levels[-1]
        if entries:
            _remove_or_enter(entries.pop(), levels)
            continue
        levels.pop()
        if not levels:
            return
        os.chdir("..")
        if os.stat(".").st_ino != levels[-1][1]:  # moved under the walk by a process still running: stop
            return
        try:  # noqa: SIM105 - contextlib would cost start-up time
            os.rmdir(name)
        except OSError:
            pass


def _remove_or_enter(name, levels):
    """Unlink ``name`` or, for a directory, make it the current one with its entries on ``levels``."""
    try:
        if not _stat.S_ISDIR(os.lstat(name).st_mode):
            os.unlink(name)
            return
        try:  # noqa: SIM105 - contextlib would cost start-up time
            os.chmod(name, 0o700)
        except OSError:  # refused where the seccomp filter refuses chmod
            pass
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            entries, inode = os.listdir(fd), os.fstat(fd).st_ino
            os.fchdir(fd)
        finally:
            os.close(fd)
        levels.append((name, inode, entries))
    except OSError:
        pass
