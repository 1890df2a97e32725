"""The remote backend: runs go to an execution service over HTTP, judging stays here.

Speaks SandboxFusion's ``POST /run_code`` protocol (request ``code``, ``language``, ``stdin``, ``run_timeout``,
``memory_limit_MB``; response ``status`` Success/Failed/SandboxError and ``run_result`` with ``status``
Finished/TimeLimitExceeded/Error, ``return_code``, ``stdout``, ``stderr``, ``execution_time``), so an existing
SandboxFusion deployment works as it is, and so does ``trl-ext sandbox-serve``. The service only runs a plain
Python program: a bootstrap that starts the harness with its payload on the same file descriptors as a local run
and relays its output (``_BOOTSTRAP``). The bootstrap writes its proof ("ready") first on stdout and lets the
harness start only then, so no program can remove it; if the harness never reports ready the bootstrap ends with
exit code 125 and says so (a program's own 125 is turned into 1): only those two facts make an "infra_error".
Records come back on stdout and are graded here: the service never sees an expected value (nor a local sandbox).

Failures of the service (connection refused, 5xx, 429, timeouts past the deadline, SandboxError) are retried with
backoff until the request's deadline, then "infra_error" (reward None): an outage never turns into a 0.

The client is the standard library's urllib (one blocking JSON POST per run, our own retries): no HTTP library
is pinned next to TRL's for it."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import threading
import time
import urllib.error
import urllib.request

from trl_ext.sandbox import native_payload
from trl_ext.sandbox._process import Progress, RunResult
from trl_ext.sandbox.base import HARNESS_SOURCE, Backend, harness_digest, payload_items
from trl_ext.sandbox.limits import ISOLATED, Limits

_READY = "ready"
_START_SLACK_S = 2.0  # two interpreter start-ups (bootstrap, harness) on the service, outside the program's time
_REMOTE_UID = 65534  # the harness drops to it only if the service runs it as root
_RETRIABLE_HTTP = (429, 500, 502, 503, 504)
_BUSY_PAUSE_S = 2.0  # the longest pause between two tries
_STEP_TIMEOUT = "trl-ext-bootstrap: step_timeout"
_NOT_READY = 125  # the relay's exit code when the harness never reported ready (a program's 125 becomes 1)
_OVERFLOW = "trl-ext-bootstrap: output_limit"
_PROGRAM_STATUSES = ("ok", "runtime_error", "timeout", "memory", "output_limit")
_PROBE_AGAIN_S = 60.0  # a service that did not speak the payload extension is asked again after this long
_READ_WHEN_REFUSED = 1 << 20  # what sandbox-serve reads of a refused body (429): past it, the client gets a reset
SECRET_ENV = "TRL_EXT_SANDBOX_SECRET"
PROTOCOL_ENV = (
    "TRL_EXT_SANDBOX_REMOTE_PROTOCOL"  # the shared secret of `trl-ext sandbox-serve`, sent as a bearer token
)

_BOOTSTRAP = """import os, sys
try:
    os.unlink(__file__)  # a service that ran this from a file: the program must not read its own harness input
except (NameError, OSError):
    pass
import json, resource, select, signal, time
HEADER, ITEMS, NONCE, FLAGS, HARNESS = {header!r}, {items!r}, {nonce!r}, {flags!r}, {harness!r}
MARKER, STEP_S, START_S, CAPS = {marker!r}, {step_s!r}, {start_s!r}, {caps!r}
READY, NOT_READY = {ready!r}, {not_ready!r}
def memfd(data):
    try:
        fd = os.memfd_create("trl-ext", 0)
    except OSError:  # refused where no memory cgroup bounds the run: a file of the scratch, unlinked once open
        while True:
            name = ".trl-ext-" + os.urandom(12).hex()
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                break
            except FileExistsError:
                continue
        os.unlink(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, 0)
    os.set_inheritable(fd, True)
    return fd
def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]
payload = json.loads(HEADER)
for name, (soft, hard) in payload["limits"].items():  # never above what the service itself allows
    cap = resource.getrlimit(getattr(resource, name))[1]
    if cap != resource.RLIM_INFINITY:
        hard = min(hard, cap)
        soft = min(soft, hard)
    payload["limits"][name] = [soft, hard]
(out_r, out_w), (err_r, err_w), (ready_r, ready_w), (go_r, go_w) = os.pipe(), os.pipe(), os.pipe(), os.pipe()
header = json.dumps(payload).encode()  # the harness is exec'd afresh: it holds none of ITEMS until it reads them
fds = [memfd(b"%010d" % len(header) + header + ITEMS), ready_w, memfd(NONCE) if NONCE is not None else -1]
os.set_inheritable(ready_w, True)
os.environ["PYTHONHASHSEED"] = "0"  # one hash secret, as locally: the rounds of an evaluation replay alike
pid = os.fork()
if pid == 0:  # the harness, once the relay below has written its proof
    os.close(go_w)
    if os.read(go_r, 1) != b"g":
        os._exit(1)
    os.setpgid(0, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.execv(sys.executable, [sys.executable, FLAGS, "-c", HARNESS] + [str(fd) for fd in fds])
for fd in fds + [out_w, err_w, go_r]:
    if fd >= 0:
        os.close(fd)
try:  # the program shares this uid: keep it out of this process's /proc files and ptrace, where /proc can be
    # opened at all (not under Landlock: there the service must still read this process's descriptors)
    os.close(os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY))
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
except Exception:
    pass
write_all(1, READY)  # before the program can exist: nothing it does can remove this proof
os.write(go_w, b"g")
os.close(go_w)
# relay stdout and stderr, killing the harness when a test case takes longer than STEP_S (no new MARKER on
# stdout) or an output passes its cap
deadline, tail, harness_ready, status, exited, linger = time.monotonic() + START_S, b"", False, None, None, None
streams = {{out_r: [1, 0, CAPS[0]], err_r: [2, 0, CAPS[1]], ready_r: [None, 0, 16]}}
while streams:
    now = time.monotonic()
    if exited is None:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            exited, linger = wait_status, now + 0.2  # a leftover grandchild may hold the pipes
    if linger is not None and now > linger:
        break
    if now >= deadline:
        status = "step_timeout" if harness_ready else None
        break
    for fd in select.select(list(streams), [], [], min(deadline - now, 0.05))[0]:
        data = os.read(fd, 1 << 16)
        if not data:
            del streams[fd]
            continue
        if fd == ready_r:
            harness_ready = harness_ready or data.startswith(READY)
            deadline = time.monotonic() + STEP_S
            continue
        target = streams[fd]
        write_all(target[0], data)
        target[1] += len(data)
        if target[1] > target[2]:
            status = "output_limit"
        if fd == out_r and MARKER and MARKER in tail + data:
            deadline = time.monotonic() + STEP_S
        if fd == out_r and MARKER:
            tail = data[-len(MARKER):]
    if status is not None:
        break
for kill in (os.killpg, os.kill) if exited is None else (os.killpg,):  # itself too if it left its group
    try:
        kill(pid, signal.SIGKILL)
    except OSError:
        pass
if exited is None:
    exited = os.waitpid(pid, 0)[1]
if not harness_ready:  # the program never ran
    os.write(2, b"\\ntrl-ext-bootstrap: harness_not_ready\\n")
    os._exit(NOT_READY)
if status is not None:
    os.write(2, ("\\ntrl-ext-bootstrap: " + status + "\\n").encode())
    os._exit(124)
code = os.WEXITSTATUS(exited) if os.WIFEXITED(exited) else 128 + os.WTERMSIG(exited)
os._exit(1 if code == NOT_READY else code)  # only this relay may say the harness never came up
"""


def bootstrap(payload: dict, nonce: bytes | None, limits: Limits, progress: Progress | None = None) -> str:
    """The one Python program sent to the service: it starts the harness on ``payload`` under ``limits`` and
    relays its stdout, enforcing ``progress``'s per-case deadline there (the service only knows the total)."""
    header, items = payload_items({**payload, "uid": _REMOTE_UID, "limits": limits.rlimits()})
    flags = ISOLATED if limits.site_packages else ISOLATED + "S"
    marker, step_s = (progress.marker, progress.step_s) if progress is not None else (b"", limits.timeout_s)
    return _BOOTSTRAP.format(
        header=json.dumps(header),
        items=items,
        nonce=nonce,
        flags=flags,
        harness=HARNESS_SOURCE,
        marker=marker,
        step_s=min(step_s, limits.timeout_s),
        start_s=_START_SLACK_S * 5,
        caps=(limits.max_output_bytes, limits.max_stderr_bytes),
        ready=_READY.encode(),
        not_ready=_NOT_READY,
    )


class RemoteBackend(Backend):
    """Runs each program on a SandboxFusion-compatible execution service at ``url``.

    Args:
        url: base URL of the service (``/run_code`` is appended).
        max_concurrency: requests in flight at once from this process.
        retries: attempts after the first one on connection errors, 5xx and 429 (exponential backoff from
            ``backoff_s``, with jitter), all within the request's deadline.
        queue_s: how long a request may wait at the service (and in retries) on top of the run's own time and
            start-up slack. With R ranks a request can wait about R runs there (each keeps up to twice the
            service's workers in flight): 15 min leaves a busy service's queue to it, and ends a hung one's.
        secret: the service's shared secret, sent as ``Authorization: Bearer <secret>`` (default: the
            ``TRL_EXT_SANDBOX_SECRET`` environment variable). It never enters a sandbox.
        protocol: "auto" sends ``trl-ext sandbox-serve`` the harness's payload where its ``/health`` names this
            harness (``native_payload``), any other service the SandboxFusion program; "bootstrap" always sends
            the program (default: ``TRL_EXT_SANDBOX_REMOTE_PROTOCOL``, else "auto").
    """

    name = "remote"

    def __init__(
        self,
        url: str,
        max_concurrency: int = 64,
        retries: int = 4,
        backoff_s: float = 0.5,
        queue_s: float = 900.0,
        secret: str | None = None,
        protocol: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.protocol = protocol or os.environ.get(PROTOCOL_ENV) or "auto"
        if self.protocol not in ("auto", "bootstrap"):
            raise ValueError(f"remote `protocol` (or {PROTOCOL_ENV}) must be auto or bootstrap, got {self.protocol!r}")
        self._speaks_payload, self._asked_at, self._probe_lock = False, -math.inf, threading.Lock()
        self._max_body: float = math.inf  # the service's request limit, where its ``/health`` names one
        self.longest_run_s: float = math.inf  # the longest run it accepts, where its ``/health`` names it
        secret = secret if secret is not None else os.environ.get(SECRET_ENV)
        self._headers = {"Content-Type": "application/json"}
        if secret:
            self._headers["Authorization"] = f"Bearer {secret}"
        self.retries, self.backoff_s, self.queue_s = retries, backoff_s, queue_s
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._service_slots: threading.BoundedSemaphore | None = None  # its workers, where its ``/health`` says

    def launch(
        self,
        payload: dict,
        stdin: bytes,
        limits: Limits,
        nonce: bytes | None = None,
        progress: Progress | None = None,
    ) -> RunResult:
        """Run remotely; per-case deadlines (``progress``) are enforced by the harness there, the overall one by
        the service (``run_timeout``) and by this request's deadline."""
        request = {
            "code": "",
            "language": "python",
            "stdin": stdin.decode("utf-8", errors="replace"),
            "run_timeout": limits.timeout_s,
            "memory_limit_MB": limits.memory_mb,  # the service bounds the run's total at 2x this, as locally
            "output_limit_bytes": limits.max_output_bytes + (1 << 17),  # sandbox-serve's own: + the relay's last read
        }
        native = self.speaks_payload()
        if native:
            request[native_payload.FIELD] = native_payload.request_field(payload, limits, nonce, progress)
            # a test's run (all its cases) fits the service's longest, which would refuse more (400: every program
            # of a many-case row None, red team round 13); each case keeps its own deadline there
            request["run_timeout"] = min(limits.timeout_s, self.longest_run_s)
        else:
            request.update(
                code=bootstrap(payload, nonce, limits, progress), run_timeout=limits.timeout_s + _START_SLACK_S
            )
        body = json.dumps(request).encode()
        if len(body) > self._max_body:  # the service would refuse it: see ``_too_large``
            return _too_large(len(body), self._max_body)
        with self._slots, self._service_slots or contextlib.nullcontext():
            start = time.monotonic()  # waiting here for a place at the service is no time of the run's
            runs = 1 if self._service_slots is None else 2  # its own, and at most one run ahead of it there
            response, error = self._post(body, start + runs * (limits.timeout_s + _START_SLACK_S))
        wall = time.monotonic() - start
        if error.startswith("HTTP 413"):
            return _too_large(len(body), None)
        if response is None:
            return RunResult("infra_error", "", f"execution service {self.url}: {error}", None, wall)
        result = (payload_run_result if native else to_run_result)(response, limits, wall)
        if progress is not None and progress.stop is not None:
            result.stdout = _until_stop(result.stdout, progress)
        return result

    def speaks_payload(self) -> bool:
        """Whether the service runs this harness's payloads itself (asked once; a no is asked again after a
        while, so a service that comes up later is used fully)."""
        if self.protocol == "bootstrap":
            return False
        with self._probe_lock:
            if not self._speaks_payload and time.monotonic() - self._asked_at > _PROBE_AGAIN_S:
                self._asked_at = time.monotonic()
                health = self._health()
                self._speaks_payload = health.get(native_payload.HEALTH_KEY) == harness_digest()
                limit, workers = health.get(native_payload.LIMIT_KEY), health.get(native_payload.WORKERS_KEY)
                self._max_body = limit if type(limit) is int and limit > 0 else math.inf
                longest = health.get(native_payload.TIMEOUT_KEY)
                self.longest_run_s = longest if type(longest) in (int, float) and longest > 0 else math.inf
                if self._service_slots is None and type(workers) is int and 0 < workers < 1 << 16:
                    # one request waiting per worker there at most (red team round 12: a right program's None)
                    self._service_slots = threading.BoundedSemaphore(2 * workers)
        return self._speaks_payload

    prepare_runs = speaks_payload  # ``Backend``'s: the service's /health names its longest run

    def _health(self) -> dict:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5.0) as reply:
                answer = json.loads(reply.read(1 << 16))
        except (OSError, ValueError, RecursionError):  # not there, not HTTP, not JSON: SandboxFusion or down
            return {}
        return answer if isinstance(answer, dict) else {}

    @staticmethod
    def unreachable(url: str, timeout_s: float = 5.0) -> str | None:
        """Why nothing answers HTTP at ``url`` now, or None (any HTTP answer, even 404, counts as reachable)."""
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/v1/ping", timeout=timeout_s):
                return None
        except urllib.error.HTTPError:
            return None
        except (OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"

    def _post(self, body: bytes, run_deadline: float) -> tuple[dict | None, str]:
        """(response, "") or (None, why) once the retries or the deadline are spent."""
        deadline = run_deadline + self.queue_s
        error, attempt = "no attempt made", 0
        while attempt <= self.retries:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            request = urllib.request.Request(self.url + "/run_code", data=body, headers=self._headers)
            busy = False
            try:
                with urllib.request.urlopen(request, timeout=remaining) as reply:
                    return json.loads(reply.read()), ""
            except urllib.error.HTTPError as exc:
                error, busy = f"HTTP {exc.code} {exc.reason}", exc.code == 429
                if exc.code in (401, 403):
                    error += f" (the service wants its shared secret: set {SECRET_ENV} to it)"
                if exc.code not in _RETRIABLE_HTTP:
                    return None, error
            except (OSError, ValueError, RecursionError) as exc:  # refused, reset, timed out, not JSON, too deep
                error = f"{type(exc).__name__}: {exc}"
                reset = isinstance(getattr(exc, "reason", exc), (ConnectionResetError, BrokenPipeError))  # urllib's
                limit = self._health().get(native_payload.LIMIT_KEY) if reset else None  # wraps what sending raised
                if type(limit) is int and len(body) > limit:  # a 413 it could not read (red team round 15, R15-4)
                    return None, f"HTTP 413 past the service's {limit} bytes"
                busy = reset and len(body) > _READ_WHEN_REFUSED
            # a busy service (429, or a reset while a large body was sent: its places or its answers' memory taken) is
            # waited for until the deadline, not counted as a failed attempt (red team rounds 13 and 14: four 429s in
            # 7.5 s made right rows None; so did the resets of 8 MiB inputs)
            pause = min(self.backoff_s * 2 ** min(attempt, 6), _BUSY_PAUSE_S) * random.uniform(0.5, 1.5)
            attempt += 0 if busy else 1
            if attempt <= self.retries and time.monotonic() + pause < deadline:
                time.sleep(pause)
        return None, f"{error} (gave up after the retries or the deadline)"


def _too_large(size: int, limit: int | None) -> RunResult:
    """A request the service refuses for its size fails the program ("output_limit", never ``infra_error``): its
    size comes from the program's own values, sent back by value in each call of an assert test (red team
    R10J-7: a 900 KB string passed to 20 calls made an 18 MB request and a None for a wrong program). A test
    whose own request is that large fails every program: raise the service's ``--max-request-bytes``."""
    over = f"over the service's limit of {limit} bytes" if limit else "refused by the service as too large (413)"
    return RunResult("output_limit", "", f"the run's request of {size} bytes is {over}", None, 0.0)


def _until_stop(stdout: str, progress: Progress) -> str:
    """The output a local run would have kept: up to the record at which ``progress.stop`` asked to stop (the
    service only answers at the end, so a binary reward's early stop is replayed on the whole output)."""
    data, marker, start = stdout.encode(), progress.marker, 0
    while (found := data.find(marker, start)) >= 0:
        end = data.find(b"\n", found)
        end = len(data) if end < 0 else end + 1
        if progress.stop(data[:end]):
            return data[:end].decode("utf-8", errors="replace")
        start = end
    return stdout


def _run_fields(response: object, wall: float) -> RunResult | tuple[dict, str, str, int | None, float]:
    """(run_result, stdout, stderr, return code, wall) of a well-formed answer, else the infra_error it is."""
    if not isinstance(response, dict):
        return RunResult("infra_error", "", f"execution service sent {_describe(response)}", None, wall)
    run = response.get("run_result")
    if response.get("status") == "SandboxError" or not isinstance(run, dict) or run.get("status") == "Error":
        message = response.get("message")
        message = message[:2000] if isinstance(message, str) and message else _describe(response)
        return RunResult("infra_error", "", f"execution service error: {message}", None, wall)
    stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
    code, elapsed = run.get("return_code"), run.get("execution_time")
    if not isinstance(stdout, str) or not isinstance(stderr, str) or not _int_or_none(code):
        return RunResult(
            "infra_error", "", f"execution service sent a malformed run_result {_describe(run)}", None, wall
        )
    if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) and 0 < elapsed < 1e9:
        wall = float(elapsed)
    return run, stdout, stderr, code, wall


def payload_run_result(response: object, limits: Limits, wall: float) -> RunResult:
    """Map ``sandbox-serve``'s answer to a ``trl_ext_payload`` request onto a RunResult: the service ran the
    harness as a local run does, so its own status (``trl_ext_status``) is the run's. Total, as ``to_run_result``."""
    fields = _run_fields(response, wall)
    if isinstance(fields, RunResult):
        return fields
    run, stdout, stderr, code, wall = fields
    status = run.get("trl_ext_status")
    if status not in _PROGRAM_STATUSES:
        return RunResult("infra_error", "", f"execution service sent no run status {_describe(status)}", code, wall)
    if len(stdout.encode()) > limits.max_output_bytes:
        status = "output_limit"
    return RunResult(status, stdout[: limits.max_output_bytes], stderr[: limits.max_stderr_bytes], code, wall)


def to_run_result(response: dict, limits: Limits, wall: float) -> RunResult:
    """Map a SandboxFusion ``/run_code`` response onto a RunResult. Only a run whose harness reported ready on
    stdout can be charged to the program; anything else (a malformed answer included) is an infrastructure fault.
    Total: any JSON value gives a RunResult, never an exception."""
    fields = _run_fields(response, wall)
    if isinstance(fields, RunResult):
        return fields
    run, stdout, stderr, code, wall = fields
    if not stdout.startswith(_READY) or (code == _NOT_READY and "trl-ext-bootstrap: harness_not_ready" in stderr):
        return RunResult("infra_error", "", f"the sandbox did not come up remotely: {stderr[-500:]}", code, wall)
    stdout = stdout[len(_READY) :]
    status = _status(run, stdout, stderr, code, limits)
    stdout, stderr = stdout[: limits.max_output_bytes], stderr[: limits.max_stderr_bytes]
    return RunResult(status, stdout, stderr, code, wall)


def _describe(value: object) -> str:
    try:
        return repr(value)[:500]
    except RecursionError:  # nested deeper than repr goes (json.loads goes as deep as the recursion limit)
        return f"a {type(value).__name__} nested too deeply to show"


def _int_or_none(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _status(run: dict, stdout: str, stderr: str, code: int | None, limits: Limits) -> str:
    if run.get("status") == "TimeLimitExceeded" or (code == 124 and _STEP_TIMEOUT in stderr[-200:]):
        return "timeout"
    if run.get("trl_ext_status") in ("output_limit", "memory", "timeout"):  # sandbox-serve's own observation
        return run["trl_ext_status"]
    if len(stdout.encode()) > limits.max_output_bytes or (code == 124 and _OVERFLOW in stderr[-200:]):
        return "output_limit"
    if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return "timeout"
    return "ok" if code == 0 else "memory" if "MemoryError" in stderr[-4096:] else "runtime_error"
