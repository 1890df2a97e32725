"""Reaching a Python installation under a directory other uids cannot search, with no capability.

As root, the landlock backend runs each program as an unprivileged uid of its own. Where the installation (or
another directory a run reads) sits under a directory that uid cannot search (``/root/.pyenv``: ``/root`` is 0700),
every import of the run would have to pass it. Keeping CAP_DAC_READ_SEARCH for that let a run read every other
uid's file its Landlock domain grants (red team round 10). Instead, the process that starts a run opens each such
root as an ``O_PATH`` descriptor while it is still root and hands it over; the run names the root
``/proc/self/fd/<n>``, and the kernel jumps through that link to the directory without searching the directories
above it. Below it the usual permissions and the run's Landlock domain apply. ``..`` climbs as far as the closed
directory, which stays closed; directories between it and the root that others may search show names and
metadata there (``stat``, ``readlink``: Landlock governs no lookup), never contents (Landlock). An interpreter started as ``/proc/self/fd/<n>/bin/python3.x`` derives its prefix, and so
its ``sys.path``, from that name; ``LD_LIBRARY_PATH`` finds libpython where the interpreter's RUNPATH points into
the closed tree. The descriptors are listed in ``TRL_EXT_HELD_FDS``, so that processes that close their other
descriptors (the fork server's children, a stdio case's child) keep them.

A name under the prefix is then only as fixed as descriptor ``<n>``: a program that closed it, or put its scratch
directory in its place (``dup2``), would have its own files taken for the installation's (the harness trusts an
extension module under the prefix: no run can write there). ``filter()`` is a seccomp filter, stacked on the run's,
that refuses exactly that: ``close``, ``dup2``/``dup3`` onto, and ``close_range`` over a held descriptor (EPERM;
Python's ``closerange`` and ``subprocess`` then close the others one by one and leave it).
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile
from pathlib import Path

HELD_FDS_ENV = "TRL_EXT_HELD_FDS"


def closed(path: str) -> bool:
    """Whether a directory above ``path`` keeps other users out (no o+x): a non-root uid cannot reach it by name."""
    parts = Path(path).parts
    return not all(os.stat(os.path.join(*parts[:i])).st_mode & 0o001 for i in range(2, len(parts)))


class HeldRoots:
    """``O_PATH`` descriptors for those of ``roots`` that are closed, opened as root (none otherwise), and the names
    a run uses for them. Hand ``descriptors`` to the child (``pass_fds``), name every path through ``path``/
    ``paths``, start it with ``env()``, then ``close()`` here."""

    def __init__(self, roots: list[str] = (), python_prefixes: list[str] = ()):
        self.fds: dict[str, int] = {}
        if os.geteuid() == 0:
            for root in dict.fromkeys(os.path.realpath(root) for root in roots):
                if os.path.exists(root) and closed(root):
                    self.fds[root] = os.open(root, os.O_PATH | os.O_CLOEXEC)
        self._libraries = [self.path(os.path.join(p, "lib")) for p in python_prefixes if self.path(p) != p]

    @property
    def descriptors(self) -> tuple[int, ...]:
        return tuple(self.fds.values())

    def path(self, path: str) -> str:
        """``path`` as the run names it: through the descriptor of the held root it lies in, if any."""
        for root in sorted(self.fds, key=len, reverse=True):
            if path == root or path.startswith(root + "/"):
                return f"/proc/self/fd/{self.fds[root]}{path[len(root) :]}"
        return path

    def paths(self, paths: list[str]) -> list[str]:
        return [self.path(path) for path in paths]

    def env(self) -> dict[str, str]:
        """What the started process's environment needs: the held descriptors, and libpython's directory."""
        if not self.fds:
            return {}
        env = {HELD_FDS_ENV: ",".join(map(str, self.descriptors))}
        if self._libraries:
            env["LD_LIBRARY_PATH"] = ":".join(self._libraries)
        return env

    def filter(self) -> bytes:
        """The stacked seccomp filter that keeps the held descriptors in place (empty when none is held)."""
        return _keeping_filter(tuple(sorted(self.descriptors))) if self.fds else b""

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def held_fds() -> tuple[int, ...]:
    """In a started process: the descriptors its held roots are reached through (``TRL_EXT_HELD_FDS``)."""
    return tuple(int(fd) for fd in os.environ.get(HELD_FDS_ENV, "").split(",") if fd.isdigit())


_LOW_32 = 0xFFFFFFFF  # the kernel reads these descriptors as (unsigned) ints: bits above 32 are ignored


@functools.cache
def _keeping_filter(fds: tuple[int, ...]) -> bytes:
    import pyseccomp as sc

    rules, deny = sc.SyscallFilter(sc.ALLOW), sc.ERRNO(errno.EPERM)
    for fd in fds:
        rules.add_rule(deny, "close", sc.Arg(0, sc.MASKED_EQ, _LOW_32, fd))
        for name in ("dup2", "dup3"):
            rules.add_rule(deny, name, sc.Arg(1, sc.MASKED_EQ, _LOW_32, fd))
        rules.add_rule(deny, "close_range", sc.Arg(0, sc.LE, fd), sc.Arg(1, sc.GE, fd))
    for index in (0, 1):  # a bound with bits above 32 would be read as another one
        rules.add_rule(deny, "close_range", sc.Arg(index, sc.GT, _LOW_32))
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()
