"""What every sandbox backend shares: the ``Backend`` launch protocol, ``SandboxUnavailable``, the interpreter and
directories a sandboxed run needs. Each backend lives in a module of its own (``bwrap``, ``landlock``, ``rlimit``,
``remote``); ``selection`` picks one."""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import marshal
import os
import sys
from pathlib import Path

from trl_ext.sandbox import memory
from trl_ext.sandbox._process import Progress, RunResult, classify, execute, memfd_with
from trl_ext.sandbox.limits import ISOLATED, SAFE_ENV, UIDS, Limits
from trl_ext.sandbox.reaper import reap_run

# the program that runs inside the sandbox: one source for ``python -c`` (``_harness.py``'s docstring)
HARNESS_SOURCE = "\n".join(
    (Path(__file__).parent / name).read_text() for name in ("_harness_python.py", "_harness.py")
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
LOADER_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")


@functools.cache
def harness_runtime_source() -> str:
    """The judged modes of the harness as one module's source: the values codec, the program's
    description, the calls' environment and the live objects of an assert test's run first (``_harness_runtime.py`` uses their names)."""
    here = Path(__file__).parent
    parts = (
        "_harness_values.py",
        "_harness_library.py",
        "_harness_program.py",
        "_harness_env.py",
        "_harness_live.py",
        "_harness_workdir.py",
        "_harness_runtime.py",
    )
    return "\n".join((here / name).read_text() for name in parts)


@functools.cache
def harness_runtime() -> dict:
    """The judged modes of the harness for a payload's "runtime": compiled once here, so that no run compiles
    them again (the bytecode serves the same interpreter; the source any other, e.g. a remote executor's)."""
    source = harness_runtime_source()
    bytecode = marshal.dumps(compile(source, "_harness_runtime.py", "exec"))
    tag = sys.implementation.cache_tag + " " + sys.version
    return {"source": source, "bytecode": base64.b64encode(bytecode).decode(), "tag": tag}


@functools.cache
def harness_digest() -> str:
    """A digest of the whole harness (launcher and judged modes): two processes whose harnesses have the same
    digest speak the same record protocol (``sandbox-serve`` then runs a client's payload with its own copy)."""
    return hashlib.sha256((HARNESS_SOURCE + "\0" + harness_runtime_source()).encode()).hexdigest()[:32]


def confined_source(name: str) -> str:
    """The source of ``name`` (a script that runs inside the sandbox: the landlock launcher, the fork server)
    behind that of ``_confinement.py``, which both use to confine a process (``python -c`` takes one source)."""
    here = Path(__file__).parent
    return (here / "_confinement.py").read_text() + "\n" + (here / name).read_text()


class SandboxUnavailable(RuntimeError):
    """The requested sandbox backend cannot run on this machine."""


def sandbox_interpreter() -> str:
    """The real interpreter behind ``sys.executable``. A virtual environment's ``python`` is a link that may live in
    a directory the sandbox hides (/tmp, $HOME); the sandbox runs ``python -sPS`` and needs no venv packages."""
    return os.path.realpath(sys.executable)


def python_roots() -> list[str]:
    """Directories the sandboxed interpreter needs: its base installation (never the venv, never $HOME as such)."""
    roots = []
    for prefix in (sys.base_prefix, os.path.dirname(os.path.dirname(sandbox_interpreter()))):
        prefix = os.path.realpath(prefix)
        if prefix in ("/", "/usr") or prefix.startswith("/usr/") or prefix in roots:
            continue
        roots.append(prefix)
    return roots


def ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the directories above ``path``, outermost first)."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclasses.dataclass
class Run:
    """State of one run: its uid, scratch directory and backend-specific extras."""

    uid: int
    scratch: str | None
    fds: list[int] = dataclasses.field(default_factory=list)
    extra: dict = dataclasses.field(default_factory=dict)


STREAMED = ("calls", "inputs")  # the payload's items: each travels in a frame of its own, after the header


def frame(body: bytes) -> bytes:
    """One frame of the harness's payload (``_harness._read_frame``): 10 ASCII digits of length, then ``body``."""
    return b"%010d" % len(body) + body


def payload_items(payload: dict) -> tuple[dict, bytes]:
    """``payload`` split into its header (all but the calls or stdio inputs) and the frames of its items. The
    harness reads the header before it forks the program's process and each item only when it hands it on."""
    header = {key: value for key, value in payload.items() if key not in STREAMED}
    items = [item for key in STREAMED for item in payload.get(key, ())]
    return header, b"".join(frame(json.dumps(item).encode()) for item in items)


def payload_bytes(payload: dict) -> bytes:
    """The bytes the harness reads on its payload descriptor: the header frame, then one frame per item."""
    header, items = payload_items(payload)
    return frame(json.dumps(header).encode()) + items


class Backend:
    """Common launch protocol: payload, readiness proof and nonce travel on inherited file descriptors."""

    name = "base"
    # whether the harness may kill(-1) between stdio cases: only where that reaches the run's own processes
    kill_all_safe = False
    longest_run_s = float("inf")  # the longest run this backend accepts (a remote service's --max-timeout)

    def prepare_runs(self) -> None:
        """Learn ``longest_run_s`` before runs are planned (a remote backend asks its service)."""

    # whether the launcher moves itself into the run's memory cgroup (``config["cgroup_procs"]``) before it execs
    enters_cgroup = False

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
        run = Run(uid=uid, scratch=self.make_scratch(uid))
        run.extra["cgroup"] = memory.create(limits)
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        fds: list[int] = [ready_w]  # handed to the child, closed by execute(); closed here if it is never called
        try:
            payload = {**payload, "uid": uid, "limits": self.rlimits(limits, run)}
            fds.append(memfd_with(payload_bytes(payload), "sandbox-payload"))
            nonce_fd = memfd_with(nonce, "sandbox-nonce") if nonce is not None else -1
            fds += [nonce_fd] if nonce_fd >= 0 else []
            flags = ISOLATED if limits.site_packages else ISOLATED + "S"
            harness_args = [
                sandbox_interpreter(),
                flags,
                "-c",
                HARNESS_SOURCE,
                str(fds[1]),
                str(ready_w),
                str(nonce_fd),
            ]
            argv = self.command(harness_args, limits, run)
            if run.extra["cgroup"] is not None and not self.enters_cgroup:
                argv = memory.enter_argv(run.extra["cgroup"], argv)
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
            run.extra["sid"] = got.pid
        except OSError as exc:
            return RunResult("infra_error", "", f"could not launch the sandbox: {exc}", None, 0.0)
        finally:
            for fd in [ready_r, *fds, *run.fds]:
                os.close(fd)
            self.finish(run)
            if run.extra.get("sid"):  # where orphans come here (PID 1, a subreaper): no zombie is left
                reap_run(run.extra["sid"], run.extra.get("orphans", ()))
            if run.extra["cgroup"] is not None:
                run.extra["oom"] = memory.oom_killed(run.extra["cgroup"])
                memory.release(run.extra["cgroup"])
            self.cleanup(uid, run.scratch)
            UIDS.release(uid)
        decode = functools.partial(bytes.decode, encoding="utf-8", errors="replace")
        status = classify(got, returncode)
        if run.extra.get("over_limit") and status == "ok":
            status = "runtime_error"  # past a limit only measured from outside (landlock's scratch size)
        if run.extra.get("oom") and status in ("runtime_error", "timeout"):
            status = "memory"  # the run's total (all its processes, tmpfs, memfds, pipes) hit memory.total_bytes
        return RunResult(
            status, decode(bytes(got.stdout)), decode(bytes(got.stderr)), returncode, wall, len(got.stdout)
        )

    def command(self, harness_args: list[str], limits: Limits, run: Run) -> list[str]:
        """The argv of one run (``run`` may carry extra descriptors to hand over in ``run.fds``)."""
        return self.argv(harness_args, limits)

    def rlimits(self, limits: Limits, run: Run) -> dict[str, tuple[int, int]]:
        return limits.rlimits()

    def finish(self, run: Run) -> None:
        """After the run, before the scratch directory is removed."""

    def env(self, scratch: str | None) -> dict[str, str]:
        return dict(SAFE_ENV)

    def make_scratch(self, uid: int) -> str | None:
        return None

    def cleanup(self, uid: int, scratch: str | None) -> None:
        pass


UNAVAILABLE = (
    "The bubblewrap code sandbox cannot run here ({detail}). Install it (Debian/Ubuntu: "
    "`apt-get install bubblewrap`) and make sure unprivileged user namespaces are enabled "
    "(`sysctl kernel.unprivileged_userns_clone=1`, or run as root), or use the landlock backend "
    '(`backend="landlock"`, Linux >= 6.12, no privileges needed) or a remote execution service '
    '(`backend="remote"`, see `trl-ext sandbox-serve`); the rlimit-only backend (`backend="rlimit"`) isolates '
    "nothing and must be chosen explicitly."
)
