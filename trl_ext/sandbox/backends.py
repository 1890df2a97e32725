"""Sandbox backends: bubblewrap and landlock (isolated, chosen by "auto"), remote (an execution service speaking
SandboxFusion's protocol, see ``remote.py``) and rlimit-only (weaker, explicit opt-in)."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

from trl_ext.sandbox import landlock
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


@dataclasses.dataclass
class _Run:
    """State of one run: its uid, scratch directory and backend-specific extras."""

    uid: int
    scratch: str | None
    fds: list[int] = dataclasses.field(default_factory=list)
    extra: dict = dataclasses.field(default_factory=dict)


class Backend:
    """Common launch protocol: payload, readiness proof and nonce travel on inherited file descriptors."""

    name = "base"
    # whether the harness may kill(-1) between stdio cases: only where that reaches the run's own processes
    kill_all_safe = False

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
        run = _Run(uid=uid, scratch=self.make_scratch(uid))
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        fds: list[int] = [ready_w]  # handed to the child, closed by execute(); closed here if it is never called
        try:
            payload = {**payload, "uid": uid, "limits": self.rlimits(limits, run)}
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
            argv = self.command(harness_args, limits, run)
            handed, fds = (*fds, *run.fds), []
            run.fds = []
            got, returncode, wall = execute(
                argv,
                env=self.env(run.scratch),
                stdin=stdin,
                limits=limits,
                pass_fds=handed,
                ready_fd=ready_r,
                cwd=run.scratch,
                progress=progress,
            )
        except OSError as exc:
            return RunResult("infra_error", "", f"could not launch the sandbox: {exc}", None, 0.0)
        finally:
            for fd in [ready_r, *fds, *run.fds]:
                os.close(fd)
            self.finish(run)
            self.cleanup(uid, run.scratch)
            UIDS.release(uid)
        decode = functools.partial(bytes.decode, encoding="utf-8", errors="replace")
        return RunResult(
            classify(got, returncode), decode(bytes(got.stdout)), decode(bytes(got.stderr)), returncode, wall
        )

    def command(self, harness_args: list[str], limits: Limits, run: _Run) -> list[str]:
        """The argv of one run (``run`` may carry extra descriptors to hand over in ``run.fds``)."""
        return self.argv(harness_args, limits)

    def rlimits(self, limits: Limits, run: _Run) -> dict[str, tuple[int, int]]:
        return limits.rlimits()

    def finish(self, run: _Run) -> None:
        """After the run, before the scratch directory is removed."""

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
    kill_all_safe = True  # a private pid namespace

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


class LandlockBackend(Backend):
    """Landlock + seccomp + rlimits + a session per run, for containers where bubblewrap cannot create
    namespaces (non-root, default Docker/Kubernetes seccomp profiles). See ``trl_ext.sandbox.landlock`` for what
    it isolates and how it bounds what needs namespaces (process count, pid visibility)."""

    name = "landlock"

    @property
    def kill_all_safe(self) -> bool:
        """Landlock's signal scope (ABI >= 6) confines kill(-1) to the run's own processes."""
        return landlock.landlock_abi() >= 6

    def command(self, harness_args: list[str], limits: Limits, run: _Run) -> list[str]:
        reason = landlock.unavailable_reason()
        if reason is not None:
            raise SandboxUnavailable(f"The landlock code sandbox cannot run here: {reason}.")
        pid_r, pid_w = os.pipe()
        os.set_blocking(pid_r, False)
        os.set_inheritable(pid_w, True)
        run.fds.append(pid_w)
        run.extra["pid_r"] = pid_r
        run.extra["watch"] = landlock.ScratchWatch(pid_r, run.scratch, limits.scratch_mb << 20)
        roots = _python_roots()
        as_root = os.geteuid() == 0
        config = {
            "pid_fd": pid_w,
            "uid": run.uid if as_root else None,
            "keep_read_search": as_root and not all(landlock.world_searchable(r) for r in roots),
            "read_only": landlock.read_only_paths(roots),
            "scratch": run.scratch,
            "min_abi": landlock.min_abi(),
        }
        return landlock.launcher_argv(config, harness_args)

    def rlimits(self, limits: Limits, run: _Run) -> dict[str, tuple[int, int]]:
        rlimits = limits.rlimits()
        if os.geteuid() != 0:
            nproc = landlock.nproc_limit(limits)
            rlimits["RLIMIT_NPROC"] = (nproc, nproc)
        return rlimits

    def env(self, scratch: str | None) -> dict[str, str]:
        return landlock.env(scratch)

    def make_scratch(self, uid: int) -> str:
        return landlock.make_scratch(uid if os.geteuid() == 0 else None)

    def finish(self, run: _Run) -> None:
        watch = run.extra.pop("watch", None)
        if watch is not None:
            sid = watch.stop()
            os.close(run.extra.pop("pid_r"))
            if sid:
                landlock.kill_session(sid)

    def cleanup(self, uid: int, scratch: str | None) -> None:
        landlock.remove_scratch(scratch)


_UNAVAILABLE = (
    "The bubblewrap code sandbox cannot run here ({detail}). Install it (Debian/Ubuntu: "
    "`apt-get install bubblewrap`) and make sure unprivileged user namespaces are enabled "
    "(`sysctl kernel.unprivileged_userns_clone=1`, or run as root), or use the landlock backend "
    '(`backend="landlock"`, Linux >= 6.12, no privileges needed) or a remote execution service '
    '(`backend="remote"`, see `trl-ext sandbox-serve`); the rlimit-only backend (`backend="rlimit"`) isolates '
    "nothing and must be chosen explicitly."
)

BACKEND_NAMES = ("auto", "bwrap", "landlock", "remote", "rlimit")
BACKEND_ENV = "TRL_EXT_SANDBOX_BACKEND"
URL_ENV = "TRL_EXT_SANDBOX_URL"

_BACKENDS: dict[str, Backend] = {}
_CHECKED: set[str] = set()
_LOCK = threading.Lock()
_LOGGER = logging.getLogger("trl_ext.sandbox")


def backend_name(name: str | Backend | None = None) -> str:
    """``name`` (or a backend's name), or the ``TRL_EXT_SANDBOX_BACKEND`` default ("auto"), validated."""
    if isinstance(name, Backend):
        return name.name
    where = "backend"
    if name is None:
        name, where = os.environ.get(BACKEND_ENV) or "auto", BACKEND_ENV
    if name not in BACKEND_NAMES:
        raise ValueError(
            f"`{where}` must be one of {', '.join(BACKEND_NAMES)} (rlimit isolates nothing: explicit opt-in only), "
            f"got {name!r}."
        )
    return name


def sandbox_url(url: str | None = None) -> str:
    """``url``, or ``TRL_EXT_SANDBOX_URL``: the execution service of the remote backend, validated."""
    where = "sandbox_url"
    if url is None:
        url, where = os.environ.get(URL_ENV), URL_ENV
    if not url:
        raise ValueError(f"The remote sandbox backend needs `sandbox_url=` or {URL_ENV} (e.g. http://host:8080).")
    parts = urllib.parse.urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.query or parts.fragment:
        raise ValueError(f"`{where}` must be an http(s) URL such as http://host:8080, got {url!r}.")
    return url.rstrip("/")


def get_backend(name: str | Backend | None = None, url: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``TRL_EXT_SANDBOX_BACKEND``, else "auto"), checked once per process
    with a trivial run. "auto" is bubblewrap where it passes that check, else landlock, else
    ``SandboxUnavailable``; it never falls back to rlimit. "remote" sends runs to ``url`` (default
    ``TRL_EXT_SANDBOX_URL``). A ``Backend`` instance is returned as is."""
    if isinstance(name, Backend):
        return name
    name = backend_name(name)
    if name == "remote":
        from trl_ext.sandbox.remote import RemoteBackend

        url = sandbox_url(url)
        with _LOCK:
            if f"remote:{url}" not in _BACKENDS:
                _BACKENDS[f"remote:{url}"] = RemoteBackend(url)
                _LOGGER.info("trl_ext sandbox: remote backend, execution service %s", url)
                reason = RemoteBackend.unreachable(url)
                if reason:  # not fatal: the service may come up later, meanwhile runs are infra_error (None)
                    _LOGGER.warning("trl_ext sandbox: the execution service %s is not reachable now (%s)", url, reason)
            return _BACKENDS[f"remote:{url}"]
    with _LOCK:
        if name == "auto":
            return _auto()
        return _checked(name)


def _checked(name: str) -> Backend:
    if name not in _BACKENDS:
        _BACKENDS[name] = {"bwrap": BwrapBackend, "landlock": LandlockBackend, "rlimit": RlimitBackend}[name]()
    backend = _BACKENDS[name]
    if name not in _CHECKED:
        _self_test(backend)
        _CHECKED.add(name)
    return backend


def _auto() -> Backend:
    if "auto" in _BACKENDS:
        return _BACKENDS["auto"]
    failures = []
    for candidate in ("bwrap", "landlock"):
        try:
            backend = _checked(candidate)
        except SandboxUnavailable as exc:
            failures.append(f"{candidate}: {exc}")
            continue
        _LOGGER.info("trl_ext sandbox: using the %s backend (auto)", candidate)
        _BACKENDS["auto"] = backend
        return backend
    raise SandboxUnavailable(
        "No isolated code sandbox can run here. "
        + " ".join(failures)
        + f" Fix one of them, or run `trl-ext sandbox-serve` on a machine where one works and set {BACKEND_ENV}=remote "
        f"and {URL_ENV}=http://that-machine:port."
    )


def _self_test(backend: Backend) -> None:
    result = backend.launch({"mode": "script", "code": "print('ok')"}, b"", Limits(timeout_s=30))
    if result.status != "ok" or result.stdout.strip() != "ok":
        detail = f"self-test status {result.status!r}, stderr: {result.stderr.strip()[-500:]!r}"
        if backend.name == "bwrap":
            raise SandboxUnavailable(_UNAVAILABLE.format(detail=detail))
        raise SandboxUnavailable(f"The {backend.name} sandbox backend failed its self-test ({detail}).")
