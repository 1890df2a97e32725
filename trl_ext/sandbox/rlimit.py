"""The rlimit-only backend: rlimits, a scrubbed environment and a scratch directory; isolates nothing else."""

from __future__ import annotations

import os
import signal
import tempfile

from trl_ext.sandbox.base import Backend
from trl_ext.sandbox.limits import SAFE_ENV, Limits
from trl_ext.sandbox.scratch import remove_scratch


class RlimitBackend(Backend):
    """rlimits, a scrubbed environment, a private scratch directory and (as root) an unprivileged uid only.

    WEAKER than bubblewrap: the program sees the whole filesystem its uid can read, has the network, and a
    double-forked daemon escapes the process group unless running as root (then every process of the sandbox
    uid is killed after the run). Use only where bubblewrap cannot run and the code is not hostile.
    """

    name = "rlimit"

    def argv(self, harness_args: list[str], limits: Limits) -> list[str]:
        return harness_args

    def env(self, scratch: str | None) -> dict[str, str]:
        return {**SAFE_ENV, "HOME": scratch, "TMPDIR": scratch}

    def make_scratch(self, uid: int) -> str:
        scratch = tempfile.mkdtemp(prefix="trl-ext-sandbox-")
        if os.geteuid() == 0:
            os.chown(scratch, uid, uid)
        return scratch

    def cleanup(self, uid: int, scratch: str | None) -> None:
        if os.geteuid() == 0:
            _kill_uid(uid)
        if scratch:
            remove_scratch(scratch)  # not shutil.rmtree: it recurses (a deep tree raised RecursionError)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is ``uid`` (the sandbox uid is used by nothing else)."""
    for _ in range(3):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid == uid:
                    os.kill(int(entry.name), signal.SIGKILL)
                    found = True
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
        if not found:
            return
