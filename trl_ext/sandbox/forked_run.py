"""One run through a fork server (``forkserver.py``): the trainer's duties around a forked child are those of a
per-run launch (``base.Backend.launch``): a uid from the pool (root), a fresh scratch directory bounded by
``ScratchWatch``, a memory cgroup the child is moved into before it starts (where one can be had, else the watcher
sums the run's memory), the wall and output limits of ``_process.execute``, and, after the run, every process of it
killed (its cgroup, else its session) and the scratch removed. A server that dies during a run gives one retry on a
fresh server, then ``infra_error``: never a failed program."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import tempfile

from trl_ext.sandbox import _process, admission, forkserver, memory
from trl_ext.sandbox._process import Progress, RunResult, execute, memfd_with
from trl_ext.sandbox.base import Backend, Run, payload_bytes
from trl_ext.sandbox.limits import UIDS, Limits
from trl_ext.sandbox.reaper import kill_session, reap_run
from trl_ext.sandbox.scratch import ScratchWatch, remove_scratch

_ATTEMPTS = 2
_LOGGER = logging.getLogger("trl_ext.sandbox")


class ForkServedBackend(Backend):
    """A backend whose runs go through its fork server (``fork_server_command`` tells how to start one) where fork
    servers are on and the kernel supports them, else through a fresh sandbox each (``Backend.launch``)."""

    def launch(
        self,
        payload: dict,
        stdin: bytes,
        limits: Limits,
        nonce: bytes | None = None,
        progress: Progress | None = None,
    ) -> RunResult:
        """Through the fork server, or a fresh sandbox (always for a run that carries a ``nonce``); admitted by
        ``admission.launch`` (as non-root: the uid's process budget)."""
        if nonce is None and forkserver.enabled() and forkserver.supported():
            self.check_available()
            return admission.launch(lambda: launch(self, payload, stdin, limits, progress), limits, payload, progress)
        per_run = super().launch
        return admission.launch(lambda: per_run(payload, stdin, limits, nonce, progress), limits, payload, progress)

    def check_available(self) -> None:
        """Raise ``SandboxUnavailable`` where this backend cannot run here."""
        raise NotImplementedError

    def fork_server_command(self, server_argv: list[str], root: str) -> forkserver.ServerCommand:
        raise NotImplementedError


def launch(backend: Backend, payload: dict, stdin: bytes, limits: Limits, progress: Progress | None) -> RunResult:
    """``backend.launch`` through its fork server (``backend.fork_server_command`` tells how to start one), or a
    fresh sandbox where that server's children would share the uid's process budget (``_shares_budget``)."""
    key = (backend.name, getattr(backend, "bwrap", None))  # a backend of another binary: another server
    for _ in range(_ATTEMPTS):
        if (key, limits.site_packages) in _SHARING_SERVERS:
            return Backend.launch(backend, payload, stdin, limits, None, progress)
        try:
            server = forkserver.acquire(key, limits.site_packages, backend.fork_server_command)
        except (forkserver.ServerLost, OSError) as exc:
            return RunResult("infra_error", "", f"could not start the sandbox's fork server: {exc}", None, 0.0)
        if _shares_budget(server, (key, limits.site_packages)):
            continue
        result = None
        try:
            result = _run_once(backend, server, payload, stdin, limits, progress)
        except forkserver.ServerLost:
            result = None
        finally:
            forkserver.release(server, lost=result is None)
        if result is not None:
            return result
    return RunResult("infra_error", "", "the sandbox's fork server died during the run", None, 0.0)


_SHARING_SERVERS: set[tuple] = set()  # (server key, site_packages) whose runs go through a sandbox each instead


def _shares_budget(server: forkserver.ForkServer, key: tuple) -> bool:
    """Whether ``server`` is a bubblewrap one whose children get no user namespace of their own, as non-root: they
    would share one RLIMIT_NPROC in the server's namespace, and the harness's refused flag stays in each child's
    private tmpfs, so none of admission's defence holds there (red team round 8, R2). Such a server is stopped and
    its backend's runs go through a fresh sandbox each (one user namespace per run), logged once; the server idles
    until the trainer exits (``forkserver.close_all``)."""
    if not server.private_scratch or not admission.shared(server.user_namespaces):
        return False
    forkserver.release(server)
    if key not in _SHARING_SERVERS:
        _SHARING_SERVERS.add(key)
        _LOGGER.warning(
            "sandbox: the bubblewrap fork server's children cannot have a user namespace of their own here, so "
            "they would share one process budget; each run gets a bubblewrap sandbox of its own instead "
            "(docs/sandbox.md, 'Process budgets as a non-root uid')"
        )
    return True


def _scratch(server: forkserver.ForkServer, uid: int | None) -> str:
    """A fresh scratch directory under the server's. Raises ``ServerLost`` (a fresh server, then infra_error)
    where it cannot be made: a run of the trainer's own uid (landlock as non-root) may have changed the
    directory's mode (Landlock does not govern chmod), which is set back first."""
    try:
        os.chmod(server.root, 0o711)
        scratch = tempfile.mkdtemp(prefix="run-", dir=server.root)
        if uid is not None:
            os.chown(scratch, uid, uid)
    except OSError as exc:
        raise forkserver.ServerLost(f"could not make the run's scratch directory: {exc}") from exc
    return scratch


def _run_once(
    backend: Backend, server: forkserver.ForkServer, payload: dict, stdin: bytes, limits: Limits, progress
) -> RunResult | None:
    """The run's result, or None when the server was lost before it reported the run's end."""
    spare = server.take()  # raises ServerLost
    cgroup = spare.cgroup
    uid = UIDS.acquire() if os.geteuid() == 0 else None
    # bubblewrap: the child's own tmpfs at /tmp, capped by the kernel; the watcher finds no directory to walk here
    scratch = os.path.join(server.root, "in-the-run") if server.private_scratch else _scratch(server, uid)
    pid_r, pid_w = os.pipe()
    os.set_blocking(pid_r, False)
    watch = ScratchWatch(
        pid_r,
        None if server.private_scratch else scratch,  # a tmpfs the kernel caps: nothing to measure
        limits.scratch_mb << 20,
        None if cgroup is not None else memory.total_bytes(limits),  # no cgroup: the watcher sums the run
        pids=functools.partial(memory.procs, cgroup) if cgroup is not None else None,
        file_bytes=limits.file_size_mb << 20,
        tasks_cap=admission.tasks_cap(limits, server.user_namespaces),
    )
    ready_r, ready_w = os.pipe()
    os.set_blocking(ready_r, False)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    child, owned = None, {ready_r, pid_w, out_w, err_w, out_r, err_r}
    body = {key: value for key, value in payload.items() if key != "runtime"}  # the server loaded it once
    run = Run(uid=uid or -1, scratch=scratch, extra={"user_namespace": server.user_namespaces})
    body.update(uid=-1 if uid is None else uid, limits=backend.rlimits(limits, run))
    header = {
        "uid": uid,
        "scratch": "/tmp" if server.private_scratch else scratch,
        "tmpfs_bytes": limits.scratch_mb << 20 if server.private_scratch else 0,
        "seccomp": "1" if cgroup is not None else "0",  # socketpair only where a cgroup bounds the run
        "user_namespace": server.user_namespaces,  # non-root: the run's own process budget (``userns.py``)
    }

    def spawn(stdin_fd: int) -> forkserver.Child:
        nonlocal child
        try:
            child = server.start(spare, header, [stdin_fd, out_w, err_w, ready_w, payload_fd], (out_r, err_r))
            owned.difference_update((out_r, err_r))  # closed with the child's stdout and stderr
        finally:
            for fd in (out_w, err_w):  # only the child writes them: end of file when it is done
                owned.discard(fd)
                os.close(fd)
        os.write(pid_w, str(child.pid).encode())
        return child

    got = returncode = failed = None
    wall = 0.0
    try:
        if cgroup is not None:
            memory.set_limit(cgroup, limits)
        payload_fd = memfd_with(payload_bytes(body), "sandbox-payload")
        got, returncode, wall = execute(
            [], env={}, stdin=stdin, limits=limits, pass_fds=(ready_w, payload_fd), ready_fd=ready_r,
            progress=progress, spawn=spawn,
        )  # fmt: skip
    except forkserver.ServerLost:
        got = None
    except OSError as exc:  # the memory cgroup refused the run's bound
        got, failed = None, RunResult("infra_error", "", f"could not set up the run: {exc}", None, 0.0)
    finally:
        sid = _finish(watch, owned, pid_r, child, spare)
        oom = False
        if cgroup is not None:
            oom = memory.oom_killed(cgroup)
            memory.release(cgroup)  # kills every process of the run: the cgroup holds them all
        elif sid:
            kill_session(sid)  # the run's session: seccomp refuses setsid, so none of its processes left it
        if child is not None:  # where orphans come here (PID 1, a subreaper, a server that died): none is left
            reap_run(child.pid, [child.pid])
        admission.note_run(None if server.private_scratch else scratch)
        remove_scratch(scratch)
        if uid is not None:
            UIDS.release(uid)
    if failed is not None:
        return failed
    if got is None or child is None or child.lost:
        return None
    return _result(got, returncode, wall, watch, oom)


def _finish(watch: ScratchWatch, owned: set[int], pid_r: int, child: forkserver.Child | None, spare) -> int:
    for fd in owned:
        with contextlib.suppress(OSError):
            os.close(fd)
    sid = watch.stop()
    os.close(pid_r)
    if child is not None:
        child.close()
    else:  # never started: it exits when its socket closes
        spare.sock.close()
        os.close(spare.pidfd)
    return sid


def _result(got, returncode: int | None, wall: float, watch: ScratchWatch, oom: bool) -> RunResult:
    status = _process.classify(got, returncode)  # looked up at each call (tests replace it)
    if watch.exceeded and status == "ok":
        status = "runtime_error"  # past the scratch bound, measured from outside
    if (oom or watch.oom) and status in ("runtime_error", "timeout"):
        status = "memory"
    decode = functools.partial(bytes.decode, encoding="utf-8", errors="replace")
    return RunResult(status, decode(bytes(got.stdout)), decode(bytes(got.stderr)), returncode, wall, len(got.stdout))
