"""Process budgets of runs as a non-root uid: a user namespace per run where one can be created.

As non-root every run has the trainer's uid, and RLIMIT_NPROC counts a uid's processes. Since Linux 5.14 the
kernel counts them per (user namespace, uid) and checks each level up to the initial namespace, so a run that
makes a user namespace of its own before its limit is set (``_confinement._own_user_namespace``) gets a budget no
sibling run can use up. Where no user namespace can be created (a container without them: Docker's and
Kubernetes' default seccomp profiles, ``user.max_user_namespaces=0``), runs share the uid's headroom instead
(``admission.py``: a uid-wide ceiling, a watcher per run, a rerun alone; docs/sandbox.md, "Process budgets as a non-root uid"). Which applies is logged once per
place: the per-run launch (checked here) and each fork server (checked by the server, in its children's
conditions).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys

_LOGGER = logging.getLogger("trl_ext.sandbox")
# a child tries what each run's launcher will do: unshare(CLONE_NEWUSER)
_PROBE = "import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0)"
_REPORTED: set[tuple[str, bool]] = set()


def counted_per_namespace(release: str | None = None) -> bool:
    """Whether the kernel counts RLIMIT_NPROC per user namespace (Linux >= 5.14, ucounts). Before that it counts a
    uid's processes in every namespace together, so a run's limit of ``nproc`` alone would refuse it any fork."""
    try:
        major, minor = (int(part) for part in (release or os.uname().release).split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def wanted() -> bool:
    """Whether runs should try a user namespace of their own: non-root (as root each run has a uid of its own,
    ``limits.UIDS``) on a kernel that counts per namespace."""
    return os.geteuid() != 0 and counted_per_namespace()


@functools.cache
def available() -> bool:
    """Whether a per-run launch as this (non-root) uid can have a user namespace of its own; checked once per
    process by a child that tries. Always False where not ``wanted``."""
    if not wanted():
        return False
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE], env={}, capture_output=True, timeout=30)
        works = done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    report("per-run launch", works)
    return works


def report(where: str, works: bool) -> None:
    """Log, once per ``where`` and outcome, which process budget the runs started there get."""
    if (where, works) in _REPORTED:
        return
    _REPORTED.add((where, works))
    if works:
        _LOGGER.info("sandbox (%s): each run has a user namespace of its own: its `nproc` budget is its own", where)
    else:
        _LOGGER.warning(
            "sandbox (%s): no user namespace can be created here, so the runs of uid %d share its RLIMIT_NPROC "
            "headroom and a run can starve a concurrent one (docs/sandbox.md, 'Process budgets as a non-root uid')",
            where,
            os.getuid(),
        )
