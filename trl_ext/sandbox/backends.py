"""Sandbox backends: bubblewrap (isolated, the default) and rlimit-only (weaker, explicit opt-in)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from trl_ext.sandbox._process import Progress, RunResult, classify, execute, memfd_with
from trl_ext.sandbox.limits import SAFE_ENV, UIDS, Limits

_HARNESS_SOURCE = (Path(__file__).parent / "_harness.py").read_text()
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_LOADER_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")


class SandboxUnavailable(RuntimeError):
    """The requested sandbox backend cannot run on this machine."""


def sandbox_interpreter() -> str:
    """The real interpreter behind ``sys.executable``. A virtual environment's ``python`` is a link that may live in
    a directory the sandbox hides (/tmp, $HOME); the sandbox runs ``python -I -S`` and needs no venv packages."""
    return os.path.realpath(sys.executable)


def _python_roots() -> list[str]:
    """Directories the sandboxed interpreter needs: its base installation (never the venv, never $HOME as such)."""
    roots = []
    for prefix in (sys.base_prefix, os.path.dirname(os.path.dirname(sandbox_interpreter()))):
        prefix = os.path.realpath(prefix)
        if prefix in ("/", "/usr") or prefix.startswith("/usr/") or prefix in roots:
            continue
        roots.append(prefix)
    return roots


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the directories above ``path``, outermost first)."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


class Backend:
    """Common launch protocol: payload, readiness proof and nonce travel on inherited file descriptors."""

    name = "base"

    def argv(self, harness_args: list[str], limits: Limits) -> list[str]:
        raise NotImplementedError

    def launch(
        self,
        payload: dict,
        stdin: bytes,
        limits: Limits,
        nonce: bytes | None = None,
        progress: Progress | None = None,
    ) -> RunResult:
        """Run the harness with ``payload`` (see ``_harness.py``) under ``limits``. A launch failure (the
        sandbox binary cannot be executed) is reported as status "infra_error", never raised."""
        uid = UIDS.acquire()
        payload = {**payload, "uid": uid, "limits": limits.rlimits()}
        scratch = self.make_scratch(uid)
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        fds: list[int] = [ready_w]  # handed to the child, closed by execute(); closed here if it is never called
        try:
            fds.append(memfd_with(json.dumps(payload).encode(), "sandbox-payload"))
            nonce_fd = memfd_with(nonce, "sandbox-nonce") if nonce is not None else -1
            fds += [nonce_fd] if nonce_fd >= 0 else []
            flags = "-I" if limits.site_packages else "-IS"
            harness_args = [
                sandbox_interpreter(),
                flags,
                "-c",
                _HARNESS_SOURCE,
                str(fds[1]),
                str(ready_w),
                str(nonce_fd),
            ]
            argv = self.argv(harness_args, limits)
            handed, fds = tuple(fds), []
            got, returncode, wall = execute(
                argv,
                env=self.env(scratch),
                stdin=stdin,
                limits=limits,
                pass_fds=handed,
                ready_fd=ready_r,
                cwd=scratch,
                progress=progress,
            )
        except OSError as exc:
            return RunResult("infra_error", "", f"could not launch the sandbox: {exc}", None, 0.0)
        finally:
            for fd in [ready_r, *fds]:
                os.close(fd)
            self.cleanup(uid, scratch)
            UIDS.release(uid)
        decode = functools.partial(bytes.decode, encoding="utf-8", errors="replace")
        return RunResult(
            classify(got, returncode), decode(bytes(got.stdout)), decode(bytes(got.stderr)), returncode, wall
        )

    def env(self, scratch: str | None) -> dict[str, str]:
        return dict(SAFE_ENV)

    def make_scratch(self, uid: int) -> str | None:
        return None

    def cleanup(self, uid: int, scratch: str | None) -> None:
        pass


class BwrapBackend(Backend):
    """bubblewrap: new pid/net/ipc/uts/mount namespaces, read-only allow-listed system and Python directories,
    a capped tmpfs at /tmp, no $HOME, no Hub cache, no dataset or checkpoints; the harness drops to an
    unprivileged uid when launched as root. Killing the launcher tears the pid namespace down, taking every
    descendant (double-forked daemons included) with it."""

    name = "bwrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap")

    def argv(self, harness_args: list[str], limits: Limits) -> list[str]:
        if self.bwrap is None or not os.access(self.bwrap, os.X_OK):
            raise SandboxUnavailable(
                _UNAVAILABLE.format(detail=f"`bwrap` not found (looked for {self.bwrap or 'it on PATH'})")
            )
        args = [self.bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--cap-drop", "ALL"]
        if os.geteuid() == 0:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # only to drop to the sandbox uid
        else:
            args += ["--unshare-user"]
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        made: set[str] = set()
        for root in _python_roots():
            for parent in _ancestors(root):
                if parent not in made:  # bwrap would create them 0700, unreadable after the uid drop
                    args += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            args += ["--ro-bind", root, root]
        for path in _LOADER_FILES:  # the dynamic loader's cache; nothing else from /etc
            args += ["--ro-bind-try", path, path]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "1777", "--size", str(limits.scratch_mb << 20), "--tmpfs", "/tmp", "--chdir", "/tmp"]
        args += ["--clearenv"] + [a for k, v in SAFE_ENV.items() for a in ("--setenv", k, v)]
        args += ["--remount-ro", "/", "--"]
        return args + harness_args


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
            shutil.rmtree(scratch, ignore_errors=True)


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


_UNAVAILABLE = (
    "The bubblewrap code sandbox cannot run here ({detail}). Install it (Debian/Ubuntu: "
    "`apt-get install bubblewrap`) and make sure unprivileged user namespaces are enabled "
    "(`sysctl kernel.unprivileged_userns_clone=1`, or run as root), or opt into the weaker rlimit-only "
    'backend explicitly with `backend="rlimit"` (no filesystem or network isolation).'
)

_BACKENDS: dict[str, Backend] = {}
_CHECKED: set[str] = set()
_LOCK = threading.Lock()


def get_backend(name: str) -> Backend:
    """The backend called ``name`` ("bwrap" or "rlimit"), checked once per process with a trivial run."""
    if name not in ("bwrap", "rlimit"):
        raise ValueError(f'`backend` must be "bwrap" or "rlimit" (explicit opt-in to the weaker one), got {name!r}.')
    with _LOCK:
        if name not in _BACKENDS:
            _BACKENDS[name] = BwrapBackend() if name == "bwrap" else RlimitBackend()
        backend = _BACKENDS[name]
        if name not in _CHECKED:
            _self_test(backend)
            _CHECKED.add(name)
    return backend


def _self_test(backend: Backend) -> None:
    result = backend.launch({"mode": "script", "code": "print('ok')"}, b"", Limits(timeout_s=30))
    if result.status != "ok" or result.stdout.strip() != "ok":
        detail = f"self-test status {result.status!r}, stderr: {result.stderr.strip()[-500:]!r}"
        if backend.name == "bwrap":
            raise SandboxUnavailable(_UNAVAILABLE.format(detail=detail))
        raise SandboxUnavailable(f"The rlimit sandbox backend failed its self-test ({detail}).")
